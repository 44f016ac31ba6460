import { builtinTools, OPENAI_SPEECH_MODEL } from '@tes/catalog';
import { StepError } from '@tes/core';
import { createNullLogger } from '@tes/observability';
import { GuardedHttp } from '@tes/outbound';
import { startFakeProviders, type FakeProviders } from '../../../tests/fake-providers';
import { CREATE_RETRY_WINDOW_MS, type ProviderContext } from '../src/providers/common';
import { falCancel, falCreate } from '../src/providers/fal';
import { OPENAI_CALL_DEADLINE_MS, openaiSpeech } from '../src/providers/openai';
import { replicateCreate } from '../src/providers/replicate';
import type { StepContext } from '../src/runner';
import { imageGenerateRunner } from '../src/tools/image-generate';

/**
 * The adapters against fakes that answer as the real APIs do (issue #28): fal's documented
 * cancel answers, fal's safety checker flags (has_nsfw_concepts), Replicate's deadline
 * (Cancel-After, and outputs deleted after an hour). A provider step is driven through its
 * runner with a StepContext of its own, so what it decides is seen without the engine.
 */
let fake: FakeProviders;

beforeAll(async () => {
  fake = await startFakeProviders();
});

afterAll(async () => {
  await fake?.stop();
});

function provider(signal = AbortSignal.timeout(10_000), jobTimeoutMs = 60_000): ProviderContext {
  return {
    http: new GuardedHttp({ allowPrivateNetworks: true }),
    baseUrls: { replicate: fake.env.REPLICATE_BASE_URL!, fal: fake.env.FAL_QUEUE_URL!, openai: fake.env.OPENAI_BASE_URL! },
    credentials: { replicate: fake.env.REPLICATE_API_TOKEN, fal: fake.env.FAL_KEY, openai: fake.env.OPENAI_API_KEY },
    jobTimeoutMs,
    signal,
  };
}

/** A step's context for a re-check of job `ref`, its checkpoint as given; what it records is kept. */
function recheckOf(ref: string, checkpoint: Record<string, unknown>, jobTimeoutMs = 60_000) {
  const recorded: { ref: string | null; checkpoint: Record<string, unknown> | null }[] = [];
  const { signal, ...providers } = provider(AbortSignal.timeout(10_000), jobTimeoutMs);
  const ctx = {
    logFields: { executionId: 'exe_test', projectId: 'prj_test', tool: 'image.generate' },
    index: 0,
    signal,
    previous: [],
    externalRef: ref,
    stepCheckpoint: checkpoint,
    recordExternalRef: (r: string, cp?: Record<string, unknown>) => (recorded.push({ ref: r, checkpoint: cp ?? null }), Promise.resolve()),
    recordUnsent: (cp: Record<string, unknown> | null) => (recorded.push({ ref: null, checkpoint: cp }), Promise.resolve()),
    databaseNow: () => Promise.resolve(Date.now()),
    workDir: '/nonexistent',
    logger: createNullLogger(),
    providers,
  } as unknown as StepContext;
  return { ctx, recorded };
}

const args = (prompt: string, count = 1) => ({
  model: 'fal/flux-schnell',
  prompt,
  count,
  size: '1024x1024' as const,
  format: 'png' as const,
  quality: 'medium' as const,
});

describe('fal cancel: every documented answer (https://fal.ai/docs/inference-api/queue/cancel)', () => {
  it('OK: a request still in the queue was removed; it never ran and is not billed', async () => {
    const id = await falCreate(provider(), 'fal-ai/flux/schnell', { prompt: 'never leaves the queue [queued]' });
    await expect(falCancel(provider(), 'fal-ai/flux/schnell', id)).resolves.toBe('cancelled');
  });

  it('CANCELLATION_REQUESTED: a running model was only signalled; it may still deliver (and bill)', async () => {
    const id = await falCreate(provider(), 'fal-ai/flux/schnell', { prompt: 'running [never]' });
    await expect(falCancel(provider(), 'fal-ai/flux/schnell', id)).resolves.toBe('requested');
  });

  it('ALREADY_COMPLETED: the request had ended; the next poll tells how', async () => {
    const id = await falCreate(provider(), 'fal-ai/flux/schnell', { prompt: 'done as cancelled [never] [completes-on-cancel]' });
    await expect(falCancel(provider(), 'fal-ai/flux/schnell', id)).resolves.toBe('finished');
  });
});

describe('fal past the job deadline, the cancel only requested', () => {
  const expired = () => ({ submittedAt: Date.now() - 120_000 });

  it('keeps the job and waits on: the model may still deliver', async () => {
    const id = await falCreate(provider(), 'fal-ai/flux/schnell', { prompt: 'slow to stop [never] [ignores-cancel]' });
    const { ctx, recorded } = recheckOf(id, expired());
    await expect(imageGenerateRunner.generate(ctx, args('slow to stop [never] [ignores-cancel]'))).resolves.toEqual({ wait: true });
    expect(recorded.at(-1)).toMatchObject({ ref: id, checkpoint: { cancelRequestedAt: expect.any(Number) } });
  });

  it('a result delivered after the cancel request is delivered and charged', async () => {
    const prompt = 'delivers anyway [never] [finishes-after-cancel]';
    const id = await falCreate(provider(), 'fal-ai/flux/schnell', { prompt });
    const first = recheckOf(id, expired());
    await imageGenerateRunner.generate(first.ctx, args(prompt));
    const { ctx } = recheckOf(id, first.recorded.at(-1)!.checkpoint!);
    await expect(imageGenerateRunner.generate(ctx, args(prompt))).resolves.toMatchObject({ units: 1 });
  });

  it('a model that stopped on the cancel (an error result) fails with provider_timeout, unbilled', async () => {
    const prompt = 'stops when asked [never]';
    const id = await falCreate(provider(), 'fal-ai/flux/schnell', { prompt });
    const first = recheckOf(id, expired());
    await imageGenerateRunner.generate(first.ctx, args(prompt));
    const { ctx } = recheckOf(id, first.recorded.at(-1)!.checkpoint!);
    await expect(imageGenerateRunner.generate(ctx, args(prompt))).rejects.toMatchObject({ errorCode: 'provider_timeout' });
  });

  it('still running when the grace after the cancel request ends: the outcome is an operator’s (needs_review)', async () => {
    const prompt = 'never stops [never] [ignores-cancel]';
    const id = await falCreate(provider(), 'fal-ai/flux/schnell', { prompt });
    const first = recheckOf(id, expired());
    await imageGenerateRunner.generate(first.ctx, args(prompt));
    const cp = { ...first.recorded.at(-1)!.checkpoint!, cancelRequestedAt: Date.now() - 120_000 };
    const { ctx } = recheckOf(id, cp);
    await expect(imageGenerateRunner.generate(ctx, args(prompt))).rejects.toMatchObject({ name: 'OutcomeUnknown' });
  });
});

describe('fal flux: has_nsfw_concepts', () => {
  it('drops the flagged images and bills the rest', async () => {
    const prompt = 'two, one flagged [polls:0] [nsfw:0]';
    const id = await falCreate(provider(), 'fal-ai/flux/schnell', { prompt, num_images: 2 });
    const { ctx } = recheckOf(id, { submittedAt: Date.now() });
    const out = await imageGenerateRunner.generate(ctx, args(prompt, 2));
    expect(out).toMatchObject({ units: 1, facts: { images: 1 } });
  });

  it('every image flagged: provider_error, nothing billed', async () => {
    const prompt = 'all flagged [polls:0] [nsfw:all]';
    const id = await falCreate(provider(), 'fal-ai/flux/schnell', { prompt, num_images: 2 });
    const { ctx } = recheckOf(id, { submittedAt: Date.now() });
    const err = await imageGenerateRunner.generate(ctx, args(prompt, 2)).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StepError);
    expect(err).toMatchObject({ errorCode: 'provider_error', message: expect.stringMatching(/safety checker flagged/) });
  });
});

describe('Replicate: outputs are deleted an hour after, so the job deadline stays below it', () => {
  it('sends Cancel-After: the job deadline (capped at 50 min) and a minute, Replicate’s backstop to our own cancel', async () => {
    await replicateCreate({ ...provider(), cancelAfterMs: 8_000 }, 'black-forest-labs/flux-schnell', { prompt: 'deadline sent' });
    await replicateCreate({ ...provider(), cancelAfterMs: 24 * 3_600_000 }, 'black-forest-labs/flux-schnell', {
      prompt: 'deadline capped',
    });
    const sent = (prompt: string) => fake.creates('replicate').find((r) => JSON.stringify(r.body).includes(prompt))!.headers['cancel-after'];
    expect(sent('deadline sent')).toBe('68s');
    expect(sent('deadline capped')).toBe('3060s');
  });

  it('a job still running 55 min after its creation is past its deadline, whatever PROVIDER_JOB_TIMEOUT_MS says', async () => {
    const id = await replicateCreate(provider(), 'black-forest-labs/flux-schnell', { prompt: 'late [never]' });
    const { ctx } = recheckOf(id, { submittedAt: Date.now() - 55 * 60_000 }, 24 * 3_600_000);
    await expect(imageGenerateRunner.generate(ctx, { ...args('late [never]'), model: 'replicate/flux-schnell' })).rejects.toMatchObject({
      errorCode: 'provider_timeout',
    });
  });
});

describe('OpenAI', () => {
  it('speech: a 429 is retried after its Retry-After, not sooner', async () => {
    const input = 'busy voice [throttle:900:1]';
    await openaiSpeech(provider(), { model: 'gpt-4o-mini-tts', input, voice: 'alloy', response_format: 'wav' }, 10_000_000);
    const sent = fake.creates('openai').filter((r) => JSON.stringify(r.body).includes(input));
    expect(sent.length).toBeGreaterThanOrEqual(2);
    expect(sent[1]!.at - sent[0]!.at).toBeGreaterThanOrEqual(950);
  });

  it('each call, its in-process retries included, ends before its step’s deadline', () => {
    const tools = builtinTools({ replicate: true, fal: true, openai: true });
    const image = tools['image.generate'].plan({
      model: 'openai/gpt-image-1.5',
      prompt: 'x',
      count: 1,
      size: '1024x1024',
      format: 'png',
      quality: 'medium',
    })[0]!;
    const speech = tools['audio.speech'].plan({ model: OPENAI_SPEECH_MODEL, text: 'x', voice: 'alloy', format: 'wav', rate: 1, pitch: 1 })[0]!;
    expect(OPENAI_CALL_DEADLINE_MS.images + CREATE_RETRY_WINDOW_MS).toBeLessThan(image.timeoutMs!);
    expect(OPENAI_CALL_DEADLINE_MS.speech + CREATE_RETRY_WINDOW_MS).toBeLessThan(speech.timeoutMs!);
  });
});
