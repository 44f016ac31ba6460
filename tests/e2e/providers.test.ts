import sharp from 'sharp';
import { addKey } from '@tes/testing';
import { startFakeProviders, type FakeProviders } from '../fake-providers';
import { downloadArtifact, probeBytes } from '../media';
import { bearer, projectBalance, startStack, waitForExecution, type TestStack } from '../stack';

/**
 * Provider-backed models against loopback servers that speak each provider's protocol:
 * success, provider error, timeout, 429 then success, long waiting with several polls, and
 * the unknown outcomes that must end in needs_review.
 */
let stack: TestStack;
let fake: FakeProviders;

beforeAll(async () => {
  fake = await startFakeProviders();
  stack = await startStack({
    env: { ...fake.env, PROVIDER_ALLOW_PRIVATE_NETWORKS: '1', WAIT_RECHECK_MS: '150', PROVIDER_JOB_TIMEOUT_MS: '8000', WORKER_CONCURRENCY: '1' },
  });
});

afterAll(async () => {
  if (stack) {
    const audit = await stack.audit();
    await stack.stop();
    expect(audit.problems).toEqual([]);
  }
  await fake?.stop();
});

async function submit(secret: string, tool: string, args: Record<string, unknown>, on: TestStack = stack): Promise<string> {
  const q = await on.http().post('/tools/quote').set(bearer(secret)).send({ tool, arguments: args });
  expect(q.status).toBe(200);
  const res = await on
    .http()
    .post(`/tools/${tool}`)
    .set({ ...bearer(secret), 'Idempotency-Key': `prov-${Math.random().toString(36).slice(2, 12)}` })
    .send({ tool, arguments: args, priceVersion: q.body.data.priceVersion, maximumChargeMicros: q.body.data.maximumChargeMicros });
  expect(res.status).toBe(202);
  return res.body.data.id;
}

function creates(prompt: string) {
  return fake.requests.filter((r) => r.method === 'POST' && (JSON.stringify(r.body) ?? '').includes(prompt));
}

describe('catalog', () => {
  it('offers the provider models whose credentials are configured', async () => {
    const p = await stack.seed();
    const res = await stack.http().get('/tools').set(bearer(p.secret));
    const gen = res.body.data.tools.find((t: { name: string }) => t.name === 'image.generate');
    expect(gen.available).toBe(true);
    expect(gen.models.map((m: { id: string; available: boolean }) => [m.id, m.available])).toEqual([
      ['replicate/flux-schnell', true],
      ['fal/flux-schnell', true],
      ['openai/gpt-image-1.5', true],
      // retired by OpenAI on 2026-10-23 (provider-prices.test.ts)
      ['openai/gpt-image-1', false],
    ]);
  });
});

describe('image.generate', () => {
  it('Replicate: waits through several polls, then stores the images; one create, charged per image', async () => {
    const p = await stack.seed({ creditMicros: 100_000 });
    const prompt = 'a red fox [polls:4]';
    const id = await submit(p.secret, 'image.generate', { model: 'replicate/flux-schnell', prompt, count: 2, size: '1536x1024', seed: 7 });
    const waiting = await waitForExecution(stack, p.secret, id, (e) => e.status === 'waiting' || e.status === 'succeeded');
    expect(waiting.status).toBe('waiting');
    expect(waiting.progress).toMatchObject({ currentStep: 'generate' });
    const done = await waitForExecution(stack, p.secret, id);
    expect(done).toMatchObject({ status: 'succeeded', chargedMicros: 8_000, reservedMicros: 8_000 });
    expect(creates(prompt)).toHaveLength(1);
    const sent = creates(prompt)[0]!;
    expect(sent.path).toBe('/replicate/v1/models/black-forest-labs/flux-schnell/predictions');
    expect(sent.body).toEqual({ input: { prompt, num_outputs: 2, aspect_ratio: '3:2', output_format: 'png', seed: 7 } });
    const polls = fake.requests.filter((r) => r.method === 'GET' && r.path.startsWith('/replicate/v1/predictions/'));
    expect(polls.length).toBeGreaterThanOrEqual(5);
    const arts = (done.output as { artifacts: { id: string }[] }).artifacts;
    expect(arts).toHaveLength(2);
    const meta = await sharp(await downloadArtifact(stack, p.secret, id, arts[0]!.id)).metadata();
    expect(meta).toMatchObject({ format: 'png', width: 64, height: 48 });
  });

  it('fal: queue API with its Key auth; JPEG asked, JPEG stored', async () => {
    const p = await stack.seed({ creditMicros: 100_000 });
    const id = await submit(p.secret, 'image.generate', { model: 'fal/flux-schnell', prompt: 'a paper boat [polls:2]', count: 1, format: 'jpeg' });
    const done = await waitForExecution(stack, p.secret, id);
    // 1024x1024 is 2 megapixels of 10^6 pixels, rounded up (docs/providers.md)
    expect(done).toMatchObject({ status: 'succeeded', chargedMicros: 8_000 });
    expect(fake.requests.some((r) => r.path.startsWith('/fal/fal-ai/flux/requests/') && r.path.endsWith('/status'))).toBe(true);
    const arts = (done.output as { artifacts: { id: string; mimeType: string }[] }).artifacts;
    expect(arts[0]!.mimeType).toBe('image/jpeg');
    expect((await sharp(await downloadArtifact(stack, p.secret, id, arts[0]!.id)).metadata()).format).toBe('jpeg');
  });

  it('OpenAI: one synchronous request, images inline', async () => {
    const p = await stack.seed({ creditMicros: 1_000_000 });
    const id = await submit(p.secret, 'image.generate', { model: 'openai/gpt-image-1.5', prompt: 'an isometric city', count: 3 });
    const done = await waitForExecution(stack, p.secret, id);
    // charged on the reported tokens: 3 x 1,056 medium image tokens at $40/1M, 12 prompt tokens at $6/1M
    expect(done).toMatchObject({ status: 'succeeded', chargedMicros: 3 * 1_056 * 40 + 12 * 6 });
    expect(creates('an isometric city')[0]!.body).toMatchObject({ model: 'gpt-image-1.5', n: 3, size: '1024x1024', quality: 'medium', output_format: 'png' });
    expect((done.output as { artifacts: unknown[] }).artifacts).toHaveLength(3);
  });

  it('a 429 on create is retried and then succeeds, without a second job', async () => {
    const p = await stack.seed({ creditMicros: 100_000 });
    const prompt = 'rate limited fox [429once]';
    const id = await submit(p.secret, 'image.generate', { model: 'replicate/flux-schnell', prompt });
    expect((await waitForExecution(stack, p.secret, id)).status).toBe('succeeded');
    expect(creates(prompt)).toHaveLength(2); // the refused one and the accepted one
  });

  it('a failed provider job fails the execution with provider_error and no charge', async () => {
    const p = await stack.seed({ creditMicros: 100_000 });
    for (const model of ['replicate/flux-schnell', 'fal/flux-schnell']) {
      const id = await submit(p.secret, 'image.generate', { model, prompt: `doomed ${model} [fail]` });
      expect(await waitForExecution(stack, p.secret, id)).toMatchObject({ status: 'failed', errorCode: 'provider_error', chargedMicros: 0 });
    }
    const rejected = await submit(p.secret, 'image.generate', { model: 'openai/gpt-image-1.5', prompt: 'not allowed [reject]' });
    expect(await waitForExecution(stack, p.secret, rejected)).toMatchObject({ status: 'failed', errorCode: 'provider_error', chargedMicros: 0 });
    const bad = await submit(p.secret, 'image.generate', { model: 'fal/flux-schnell', prompt: 'html instead of png [badfile]' });
    expect(await waitForExecution(stack, p.secret, bad)).toMatchObject({ status: 'failed', errorCode: 'provider_error', chargedMicros: 0 });
    // a job that ran but delivered nothing (a safety filter took every image) is not charged the minimum
    const empty = await submit(p.secret, 'image.generate', { model: 'replicate/flux-schnell', prompt: 'all filtered [empty]' });
    expect(await waitForExecution(stack, p.secret, empty)).toMatchObject({ status: 'failed', errorCode: 'provider_error', chargedMicros: 0 });
    expect(await projectBalance(stack.db, p.projectId)).toEqual({ available: 100_000, reserved: 0 });
  });

  it('a job that never finishes is cancelled at the job deadline, then fails with provider_timeout', async () => {
    const p = await stack.seed({ creditMicros: 100_000 });
    const ids = await Promise.all(
      ['replicate/flux-schnell', 'fal/flux-schnell'].map((model) => submit(p.secret, 'image.generate', { model, prompt: `stuck ${model} [never]` })),
    );
    for (const id of ids) {
      const done = await waitForExecution(stack, p.secret, id, undefined, 25_000);
      expect(done).toMatchObject({ status: 'failed', errorCode: 'provider_timeout', chargedMicros: 0 });
    }
    // left running, the job could finish and be billed while the caller pays nothing: it was cancelled
    expect(fake.requests.filter((r) => r.path.endsWith('/cancel') && r.method === 'POST' && r.path.startsWith('/replicate/'))).toHaveLength(1);
    expect(fake.requests.filter((r) => r.path.endsWith('/cancel') && r.method === 'PUT' && r.path.startsWith('/fal/'))).toHaveLength(1);
    expect(await projectBalance(stack.db, p.projectId)).toEqual({ available: 100_000, reserved: 0 });
  });

  it('a job that ended just as it was cancelled delivers its result; a cancel that gets no answer leaves the outcome to an operator', async () => {
    const p = await stack.seed({ creditMicros: 100_000 });
    const late = await submit(p.secret, 'image.generate', { model: 'fal/flux-schnell', prompt: 'just in time [never] [completes-on-cancel]' });
    const unanswered = await submit(p.secret, 'image.generate', { model: 'replicate/flux-schnell', prompt: 'cancel lost [never] [cancel-500:forever]' });
    expect(await waitForExecution(stack, p.secret, late, undefined, 25_000)).toMatchObject({ status: 'succeeded', chargedMicros: 8_000 });
    expect(await waitForExecution(stack, p.secret, unanswered, undefined, 25_000)).toMatchObject({
      status: 'needs_review',
      errorCode: 'provider_outcome_unknown',
      chargedMicros: 0,
    });
    expect(await projectBalance(stack.db, p.projectId)).toEqual({ available: 100_000 - 8_000 - 4_000, reserved: 4_000 });
  });

  it('an unanswered create (500, or a dropped connection) ends in needs_review with the reservation held, never a second request', async () => {
    const p = await stack.seed({ creditMicros: 100_000 });
    for (const [model, prompt] of [
      ['replicate/flux-schnell', 'server error [500]'],
      ['openai/gpt-image-1.5', 'dropped [hang]'],
    ] as const) {
      const id = await submit(p.secret, 'image.generate', { model, prompt });
      const done = await waitForExecution(stack, p.secret, id);
      expect(done).toMatchObject({ status: 'needs_review', errorCode: 'provider_outcome_unknown', chargedMicros: 0 });
      expect(creates(prompt)).toHaveLength(1);
    }
    // held: Replicate's one image, and OpenAI's quote (medium 1024x1024: 1,056 tokens x 40, the prompt's 14 bytes + 64 x 6)
    const openai = 1_056 * 40 + (14 + 64) * 6;
    expect(await projectBalance(stack.db, p.projectId)).toEqual({ available: 100_000 - 4_000 - openai, reserved: 4_000 + openai });
  });

  it('after a crash between sending and recording the reference, the execution goes to needs_review without a resend', async () => {
    const p = await stack.seed({ creditMicros: 100_000 });
    await stack.stopWorker();
    const id = await submit(p.secret, 'image.generate', { model: 'fal/flux-schnell', prompt: 'crash window' });
    // what a worker killed right after sending the create leaves behind
    await stack
      .db('executions')
      .where({ id })
      .update({ status: 'running', attempts: 1, claims: 1, lease_owner: 'wrk_killed', lease_expires_at: stack.db.raw("now() - interval '1 second'") });
    await stack.db('execution_steps').insert({ execution_id: id, project_id: p.projectId, index: 0, name: 'generate', status: 'running', external: true });
    await stack.startWorker();
    const done = await waitForExecution(stack, p.secret, id);
    expect(done).toMatchObject({ status: 'needs_review', chargedMicros: 0, reservedMicros: 8_000 });
    expect(creates('crash window')).toHaveLength(0);
  });

  it('a waiting execution frees its consumer slot (concurrency 1): other work runs meanwhile', async () => {
    const p = await stack.seed({ creditMicros: 100_000 });
    const key2 = await addKey(stack.db, p.projectId);
    const slow = await submit(p.secret, 'image.generate', { model: 'replicate/flux-schnell', prompt: 'slow one [polls:8]' });
    await waitForExecution(stack, p.secret, slow, (e) => e.status === 'waiting');
    const quick = await submit(key2.secret, 'test.sleep', { seconds: 0, steps: 1, costMicrosPerStep: 1 });
    const quickDone = await waitForExecution(stack, key2.secret, quick);
    expect(quickDone.status).toBe('succeeded');
    const slowNow = await stack.db('executions').where({ id: slow }).first();
    expect(['waiting', 'running']).toContain(slowNow.status);
    expect((await waitForExecution(stack, p.secret, slow, undefined, 20_000)).status).toBe('succeeded');
  });
});

/**
 * A provider that cannot be read for a while: its status, fal's result URL or the output
 * files answer 5xx or drop the connection for longer than the worker's in-process retries
 * (the fake's [point-CODE:MS] tags, counted from the first such request). Once the job
 * exists, a failed read is not an outcome: the execution keeps waiting until the job
 * deadline (PROVIDER_JOB_TIMEOUT_MS), and if the job still cannot be read it goes to
 * needs_review with its reservation held. It never fails at zero charge while the provider
 * may be running, and billing us for, the job.
 */
describe('a provider that cannot be read', () => {
  /** The provider job's reference the execution recorded. */
  async function jobOf(on: TestStack, executionId: string): Promise<string> {
    const row = await on.db('execution_steps').where({ execution_id: executionId, index: 0 }).first('external_ref');
    return row.external_ref as string;
  }

  it.each([
    ['Replicate: status polls answer HTTP 500', 'image.generate', { model: 'replicate/flux-schnell', prompt: 'blip fox [status-500:2000]' }, 4_000],
    ['fal: status polls drop the connection', 'image.generate', { model: 'fal/flux-schnell', prompt: 'blip boat [status-drop:2000]' }, 8_000],
    ['Replicate: the output files answer HTTP 503', 'image.generate', { model: 'replicate/flux-schnell', prompt: 'blip owl [file-503:2000]', count: 2 }, 8_000],
    [
      'fal: the result URL answers 502, then the video drops the connection',
      'video.generate',
      { model: 'fal/kling-video-v1-standard', prompt: 'blip waves [result-502:2000] [file-drop:2000]', durationSeconds: 5 },
      300_000,
    ],
  ] as const)('%s for 2 s, longer than the in-process retries: the execution waits it out, succeeds and is charged', async (_name, tool, args, charge) => {
    const p = await stack.seed({ creditMicros: 1_000_000 });
    const id = await submit(p.secret, tool, args);
    const done = await waitForExecution(stack, p.secret, id);
    expect(done).toMatchObject({ status: 'succeeded', chargedMicros: charge, errorCode: null });
    expect((done.output as { artifacts: unknown[] }).artifacts).toHaveLength('count' in args ? args.count : 1);
    expect(creates(args.prompt)).toHaveLength(1);
    // The outage really outlasted the in-process retries: the step waited for a re-check.
    expect(stack.logs.records.some((r) => r.message === 'worker.provider.read_failed' && r.executionId === id)).toBe(true);
    expect(await projectBalance(stack.db, p.projectId)).toEqual({ available: 1_000_000 - charge, reserved: 0 });
  });

  it('reads that never work end in needs_review at the job deadline, reservation held: status, result and files', async () => {
    // A stack of its own with a shorter job deadline, to keep the wait short.
    const own = await startStack({ env: { ...fake.env, PROVIDER_ALLOW_PRIVATE_NETWORKS: '1', WAIT_RECHECK_MS: '150', PROVIDER_JOB_TIMEOUT_MS: '4000' } });
    try {
      const p = await own.seed({ creditMicros: 100_000 });
      const cases = [
        { model: 'replicate/flux-schnell', prompt: 'lost fox [status-500:forever]', reserved: 4_000 },
        { model: 'fal/flux-schnell', prompt: 'lost boat [result-502:forever]', reserved: 8_000 },
        { model: 'fal/flux-schnell', prompt: 'lost owl [file-drop:forever]', reserved: 8_000 },
      ];
      const ids = await Promise.all(cases.map(({ model, prompt }) => submit(p.secret, 'image.generate', { model, prompt }, own)));
      for (const [i, id] of ids.entries()) {
        const done = await waitForExecution(own, p.secret, id);
        expect(done).toMatchObject({ status: 'needs_review', errorCode: 'provider_outcome_unknown', chargedMicros: 0, reservedMicros: cases[i]!.reserved });
        expect(done.errorMessage).toMatch(/could not be read before its deadline/);
        expect(creates(cases[i]!.prompt)).toHaveLength(1);
        // It kept reading, with backoff, until the deadline, without hammering the provider.
        const job = await jobOf(own, id);
        const created = creates(cases[i]!.prompt)[0]!.at;
        const reads = fake.requests.filter((r) => r.method === 'GET' && r.path.includes(job));
        expect(reads.at(-1)!.at - created).toBeGreaterThanOrEqual(4_000);
        expect(reads.length).toBeLessThan(60);
      }
      expect(await projectBalance(own.db, p.projectId)).toEqual({ available: 100_000 - 20_000, reserved: 20_000 });
      expect((await own.audit()).ok).toBe(true);
    } finally {
      await own.stop();
    }
  });
});

describe('audio.speech on OpenAI', () => {
  it('speaks through the audio/speech API; the audio is checked and charged per 1,000 characters', async () => {
    const p = await stack.seed({ creditMicros: 100_000 });
    const text = 'Welcome back. Your report is ready.';
    const id = await submit(p.secret, 'audio.speech', { model: 'openai/gpt-4o-mini-tts', text, voice: 'coral', format: 'wav' });
    const done = await waitForExecution(stack, p.secret, id);
    expect(done).toMatchObject({ status: 'succeeded', chargedMicros: 20_000 });
    expect(creates(text)[0]!.body).toEqual({ model: 'gpt-4o-mini-tts', input: text, voice: 'coral', response_format: 'wav' });
    const art = (done.output as { artifacts: { id: string }[] }).artifacts[0]!;
    const probe = await probeBytes(await downloadArtifact(stack, p.secret, id, art.id), 'wav');
    expect(Number(probe.format.duration)).toBeCloseTo(1.5, 1);
    const bad = await submit(p.secret, 'audio.speech', { model: 'openai/gpt-4o-mini-tts', text: 'noise [badfile]', voice: 'alloy' });
    expect(await waitForExecution(stack, p.secret, bad)).toMatchObject({ status: 'failed', errorCode: 'provider_error', chargedMicros: 0 });
  });

  it('refuses a voice of the other model before anything is reserved', async () => {
    const p = await stack.seed({ creditMicros: 100_000 });
    for (const args of [
      { model: 'openai/gpt-4o-mini-tts', text: 'hi', voice: 'en-us' },
      { model: 'espeak-ng', text: 'hi', voice: 'coral' },
      { text: 'hi', voice: 'nova' },
    ]) {
      const q = await stack.http().post('/tools/quote').set(bearer(p.secret)).send({ tool: 'audio.speech', arguments: args });
      expect(q.status).toBe(400);
      expect(q.body.error.message).toBe('invalid_arguments');
    }
  });
});

describe('video.generate', () => {
  it('fal: waits, checks the returned video with ffprobe, charges per delivered second', async () => {
    const p = await stack.seed({ creditMicros: 1_000_000 });
    const id = await submit(p.secret, 'video.generate', { model: 'fal/kling-video-v1-standard', prompt: 'waves [polls:2]', durationSeconds: 10 });
    const done = await waitForExecution(stack, p.secret, id);
    // the fake returns a 5 s video for a 10 s request: 5 seconds are charged, of 600,000 reserved
    expect(done).toMatchObject({ status: 'succeeded', reservedMicros: 600_000, chargedMicros: 300_000 });
    const art = (done.output as { artifacts: { id: string }[] }).artifacts[0]!;
    const probe = await probeBytes(await downloadArtifact(stack, p.secret, id, art.id), 'mp4');
    expect(probe.streams[0]!.codec_name).toBe('h264');
    expect(creates('waves [polls:2]')[0]!.body).toEqual({ prompt: 'waves [polls:2]', duration: '10', aspect_ratio: '16:9' });
  });
});

describe('without PROVIDER_ALLOW_PRIVATE_NETWORKS', () => {
  it('a provider base URL on loopback is refused before any request is sent: provider_error, nothing charged', async () => {
    const own = await startStack({ env: { ...fake.env, WAIT_RECHECK_MS: '150' } });
    try {
      const p = await own.seed({ creditMicros: 100_000 });
      const before = fake.requests.length;
      const q = await own
        .http()
        .post('/tools/quote')
        .set(bearer(p.secret))
        .send({ tool: 'image.generate', arguments: { model: 'replicate/flux-schnell', prompt: 'ssrf probe' } });
      const res = await own
        .http()
        .post('/tools/image.generate')
        .set({ ...bearer(p.secret), 'Idempotency-Key': 'ssrf-probe-1' })
        .send({
          tool: 'image.generate',
          arguments: { model: 'replicate/flux-schnell', prompt: 'ssrf probe' },
          priceVersion: q.body.data.priceVersion,
          maximumChargeMicros: q.body.data.maximumChargeMicros,
        });
      const done = await waitForExecution(own, p.secret, res.body.data.id);
      expect(done).toMatchObject({ status: 'failed', errorCode: 'provider_error', chargedMicros: 0 });
      expect(done.errorMessage).toMatch(/refusing to connect to 127\.0\.0\.1/);
      expect(fake.requests.length).toBe(before);
      expect((await own.audit()).ok).toBe(true);
    } finally {
      await own.stop();
    }
  });
});
