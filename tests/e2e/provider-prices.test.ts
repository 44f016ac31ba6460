import { startFakeProviders, type FakeProviders } from '../fake-providers';
import { bearer, projectBalance, startStack, waitForExecution, type TestStack } from '../stack';

/**
 * Provider models as the providers have them (issue #28): a retired model is refused before
 * anything is reserved, OpenAI images are asked at an explicit quality and settled on the
 * tokens OpenAI reports (never above the reservation), fal flux is charged per megapixel, and
 * OpenAI speech takes at most 4,096 characters.
 */
let stack: TestStack;
let fake: FakeProviders;

beforeAll(async () => {
  fake = await startFakeProviders();
  stack = await startStack({ env: { ...fake.env, PROVIDER_ALLOW_PRIVATE_NETWORKS: '1', WAIT_RECHECK_MS: '150', PROVIDER_JOB_TIMEOUT_MS: '8000' } });
});

afterAll(async () => {
  if (stack) {
    const audit = await stack.audit();
    await stack.stop();
    expect(audit.problems).toEqual([]);
  }
  await fake?.stop();
});

async function quote(secret: string, tool: string, args: Record<string, unknown>) {
  return stack.http().post('/tools/quote').set(bearer(secret)).send({ tool, arguments: args });
}

async function submitRaw(secret: string, tool: string, args: Record<string, unknown>, maximumChargeMicros = 1_000_000) {
  const current = await quote(secret, 'image.render', { text: 'x' });
  return stack
    .http()
    .post(`/tools/${tool}`)
    .set({ ...bearer(secret), 'Idempotency-Key': `price-${Math.random().toString(36).slice(2, 12)}` })
    .send({ tool, arguments: args, priceVersion: current.body.data.priceVersion, maximumChargeMicros });
}

async function submit(secret: string, tool: string, args: Record<string, unknown>): Promise<{ id: string; quoted: number }> {
  const q = await quote(secret, tool, args);
  expect(q.status).toBe(200);
  const res = await submitRaw(secret, tool, args, q.body.data.maximumChargeMicros);
  expect(res.status).toBe(202);
  return { id: res.body.data.id, quoted: q.body.data.maximumChargeMicros };
}

async function executions(projectId: string): Promise<number> {
  return (await stack.db('executions').where({ project_id: projectId })).length;
}

async function cappedMicros(): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${stack.worker!.metricsPort}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith('tes_charge_capped_micros_total{tool="image.generate",'));
  return line ? Number(line.split(' ').pop()) : 0;
}

describe('model lifecycle', () => {
  it('GET /tools lists gpt-image-1 as retired and unavailable, gpt-image-1.5 in its place', async () => {
    const p = await stack.seed();
    const res = await stack.http().get('/tools').set(bearer(p.secret));
    const gen = res.body.data.tools.find((t: { name: string }) => t.name === 'image.generate');
    const models = gen.models as { id: string; available: boolean; description: string }[];
    expect(models.map((m) => [m.id, m.available])).toEqual([
      ['replicate/flux-schnell', true],
      ['fal/flux-schnell', true],
      ['openai/gpt-image-1.5', true],
      ['openai/gpt-image-1', false],
    ]);
    expect(models.find((m) => m.id === 'openai/gpt-image-1')!.description).toMatch(/Retired on 2026-10-23/);
  });

  it('a quote or a submit for a retired model is refused with model_unavailable (reason retired), nothing reserved', async () => {
    const p = await stack.seed({ creditMicros: 1_000_000 });
    const args = { model: 'openai/gpt-image-1', prompt: 'an old model' };
    const q = await quote(p.secret, 'image.generate', args);
    expect(q.status).toBe(404);
    expect(q.body.error).toMatchObject({ message: 'model_unavailable', details: { model: 'openai/gpt-image-1', reason: 'retired', retiredOn: '2026-10-23' } });
    const s = await submitRaw(p.secret, 'image.generate', args, 70_000);
    expect(s.status).toBe(404);
    expect(s.body.error).toMatchObject({ message: 'model_unavailable', details: { reason: 'retired' } });
    expect(await executions(p.projectId)).toBe(0);
    expect(await projectBalance(stack.db, p.projectId)).toEqual({ available: 1_000_000, reserved: 0 });
    expect(creates('an old model')).toHaveLength(0);
  });
});

function creates(prompt: string) {
  return fake.requests.filter((r) => r.method === 'POST' && (JSON.stringify(r.body) ?? '').includes(prompt));
}

describe('OpenAI images', () => {
  it('asks gpt-image-1.5 at the explicit quality, reserves the quote and charges the tokens OpenAI reported', async () => {
    const p = await stack.seed({ creditMicros: 2_000_000 });
    const prompt = 'a lighthouse in a storm';
    const { id, quoted } = await submit(p.secret, 'image.generate', { model: 'openai/gpt-image-1.5', prompt, count: 2, quality: 'high', size: '1536x1024' });
    // quote: 2 x 6,208 image tokens at $40/1M, and the prompt's 23 bytes + 64 at $6/1M
    expect(quoted).toBe(2 * 6_208 * 40 + (23 + 64) * 6);
    const done = await waitForExecution(stack, p.secret, id);
    expect(creates(prompt)[0]!.body).toEqual({ model: 'gpt-image-1.5', prompt, n: 2, size: '1536x1024', quality: 'high', output_format: 'png' });
    // reported: 12,416 output tokens and ceil(23/4) + 7 = 13 input tokens
    expect(done).toMatchObject({ status: 'succeeded', reservedMicros: quoted, chargedMicros: 12_416 * 40 + 13 * 6 });
    expect(await projectBalance(stack.db, p.projectId)).toEqual({ available: 2_000_000 - (12_416 * 40 + 78), reserved: 0 });
  });

  it('the default quality is medium, sent explicitly', async () => {
    const p = await stack.seed({ creditMicros: 1_000_000 });
    const { id } = await submit(p.secret, 'image.generate', { model: 'openai/gpt-image-1.5', prompt: 'a quiet harbour' });
    expect(await waitForExecution(stack, p.secret, id)).toMatchObject({ status: 'succeeded', chargedMicros: 1_056 * 40 + (Math.ceil(15 / 4) + 7) * 6 });
    expect(creates('a quiet harbour')[0]!.body).toMatchObject({ quality: 'medium', size: '1024x1024' });
  });

  it('a reported usage above the reservation is charged the reservation, and the excess is counted as capped', async () => {
    const p = await stack.seed({ creditMicros: 1_000_000 });
    const before = await cappedMicros();
    const prompt = 'an expensive surprise [usage:5000]';
    const { id, quoted } = await submit(p.secret, 'image.generate', { model: 'openai/gpt-image-1.5', prompt, quality: 'medium' });
    const done = await waitForExecution(stack, p.secret, id);
    const reported = 5_000 * 40 + (Math.ceil(Buffer.byteLength(prompt) / 4) + 7) * 6;
    expect(done).toMatchObject({ status: 'succeeded', reservedMicros: quoted, chargedMicros: quoted });
    expect((await cappedMicros()) - before).toBe(reported - quoted);
    expect(stack.logs.records.some((r) => r.message === 'worker.step.cost_capped' && r.executionId === id)).toBe(true);
  });
});

describe('fal flux per megapixel', () => {
  it('1024x1024 and 1536x1024 are two megapixels each (10^6 pixels, rounded up): charged $0.004 per megapixel', async () => {
    const p = await stack.seed({ creditMicros: 1_000_000 });
    const square = await submit(p.secret, 'image.generate', { model: 'fal/flux-schnell', prompt: 'a square boat', size: '1024x1024' });
    const wide = await submit(p.secret, 'image.generate', { model: 'fal/flux-schnell', prompt: 'a wide boat', size: '1536x1024', count: 2 });
    expect([square.quoted, wide.quoted]).toEqual([8_000, 16_000]);
    expect(await waitForExecution(stack, p.secret, square.id)).toMatchObject({ status: 'succeeded', chargedMicros: 8_000 });
    expect(await waitForExecution(stack, p.secret, wide.id)).toMatchObject({ status: 'succeeded', chargedMicros: 16_000 });
  });
});

describe('OpenAI speech input', () => {
  it('a text of 4,097 characters is refused at quote and at submit (invalid_arguments), nothing reserved; 4,096 is taken', async () => {
    const p = await stack.seed({ creditMicros: 1_000_000 });
    const { secret } = p;
    const args = { model: 'openai/gpt-4o-mini-tts', text: 'a'.repeat(4_097), voice: 'alloy' };
    const q = await quote(secret, 'audio.speech', args);
    expect(q.status).toBe(400);
    expect(q.body.error.message).toBe('invalid_arguments');
    const s = await submitRaw(secret, 'audio.speech', args);
    expect(s.status).toBe(400);
    expect(s.body.error.message).toBe('invalid_arguments');
    expect(await executions(p.projectId)).toBe(0);
    expect(await projectBalance(stack.db, p.projectId)).toEqual({ available: 1_000_000, reserved: 0 });
    expect((await quote(secret, 'audio.speech', { ...args, text: 'a'.repeat(4_096) })).status).toBe(200);
  });
});
