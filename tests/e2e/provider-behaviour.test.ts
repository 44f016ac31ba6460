import { startFakeProviders, type FakeProviders } from '../fake-providers';
import { bearer, projectBalance, startStack, waitForExecution, type TestStack } from '../stack';

/**
 * The provider behaviours of issue #28, end to end and in money: fal's cancel answers and a
 * result that arrives after one, fal's safety-checker flags, and Replicate's 429 waited out
 * through the delay queue. The fakes answer as the real APIs do (tests/fake-providers.ts);
 * every charge stays within its reservation and the ledger audit passes.
 */
let stack: TestStack;
let fake: FakeProviders;
const JOB_TIMEOUT_MS = 15_000;

beforeAll(async () => {
  fake = await startFakeProviders();
  stack = await startStack({
    env: {
      ...fake.env,
      PROVIDER_ALLOW_PRIVATE_NETWORKS: '1',
      WAIT_RECHECK_MS: '150',
      PROVIDER_JOB_TIMEOUT_MS: String(JOB_TIMEOUT_MS),
      WORKER_CONCURRENCY: '4',
      RATE_LIMIT_PER_MINUTE: '100000',
    },
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

async function submit(secret: string, tool: string, args: Record<string, unknown>): Promise<string> {
  const q = await stack.http().post('/tools/quote').set(bearer(secret)).send({ tool, arguments: args });
  expect(q.status).toBe(200);
  const res = await stack
    .http()
    .post(`/tools/${tool}`)
    .set({ ...bearer(secret), 'Idempotency-Key': `behave-${Math.random().toString(36).slice(2, 12)}` })
    .send({ tool, arguments: args, priceVersion: q.body.data.priceVersion, maximumChargeMicros: q.body.data.maximumChargeMicros });
  expect(res.status).toBe(202);
  return res.body.data.id;
}

const sentWith = (prompt: string) => fake.requests.filter((r) => (JSON.stringify(r.body) ?? '').includes(prompt));
const wait = (id: string, secret: string) => waitForExecution(stack, secret, id, undefined, 45_000);

describe('fal: a job past its deadline, cancelled', () => {
  it('a running model that delivers after CANCELLATION_REQUESTED is charged; one that stops is not; one that never stops is an operator’s', async () => {
    const p = await stack.seed({ creditMicros: 100_000 });
    const [delivered, stopped, endless, queued] = await Promise.all(
      ['late but done [never] [finishes-after-cancel]', 'stops when asked [never]', 'ignores the cancel [never] [ignores-cancel]', 'still queued [queued]'].map(
        (prompt) => submit(p.secret, 'image.generate', { model: 'fal/flux-schnell', prompt }),
      ),
    );
    expect(await wait(delivered!, p.secret)).toMatchObject({ status: 'succeeded', chargedMicros: 8_000, reservedMicros: 8_000 });
    expect(await wait(stopped!, p.secret)).toMatchObject({ status: 'failed', errorCode: 'provider_timeout', chargedMicros: 0 });
    // fal's documented OK: removed from the queue, it never ran (not a failed read: no needs_review)
    expect(await wait(queued!, p.secret)).toMatchObject({ status: 'failed', errorCode: 'provider_timeout', chargedMicros: 0 });
    expect(await wait(endless!, p.secret)).toMatchObject({ status: 'needs_review', errorCode: 'provider_outcome_unknown', chargedMicros: 0 });
    // one cancel each: a cancel request is not repeated while the job is polled on
    for (const id of [delivered!, stopped!, endless!, queued!]) {
      const row = await stack.db('execution_steps').where({ execution_id: id, index: 0 }).first('external_ref');
      expect(fake.requests.filter((r) => r.method === 'PUT' && r.path.endsWith(`/requests/${row.external_ref as string}/cancel`))).toHaveLength(1);
    }
    expect(await projectBalance(stack.db, p.projectId)).toEqual({ available: 100_000 - 8_000 - 8_000, reserved: 8_000 });
  });
});

describe('fal flux: has_nsfw_concepts', () => {
  it('flagged images are dropped and not charged; all flagged fails unbilled', async () => {
    const p = await stack.seed({ creditMicros: 100_000 });
    const some = await submit(p.secret, 'image.generate', { model: 'fal/flux-schnell', prompt: 'three, one flagged [nsfw:1]', count: 3 });
    const all = await submit(p.secret, 'image.generate', { model: 'fal/flux-schnell', prompt: 'all flagged [nsfw:all]', count: 2 });
    const done = await wait(some, p.secret);
    expect(done).toMatchObject({ status: 'succeeded', reservedMicros: 24_000, chargedMicros: 16_000 });
    expect((done.output as { artifacts: unknown[] }).artifacts).toHaveLength(2);
    const refused = await wait(all, p.secret);
    expect(refused).toMatchObject({ status: 'failed', errorCode: 'provider_error', chargedMicros: 0 });
    expect(refused.errorMessage).toMatch(/safety checker flagged every image/);
    expect(await projectBalance(stack.db, p.projectId)).toEqual({ available: 100_000 - 16_000, reserved: 0 });
  });
});

describe('Replicate: 429 "resets in ~Ns"', () => {
  it('the wait goes to the delay queue and the create is sent again after Retry-After: one prediction, charged', async () => {
    const p = await stack.seed({ creditMicros: 100_000 });
    const prompt = 'throttled fox [throttle:8000:2]';
    const id = await submit(p.secret, 'image.generate', { model: 'replicate/flux-schnell', prompt });
    expect(await wait(id, p.secret)).toMatchObject({ status: 'succeeded', chargedMicros: 4_000 });
    const sent = sentWith(prompt).filter((r) => r.method === 'POST');
    // refused for 8 s, each re-send after the 2 s Retry-After: a handful of creates, not a burst
    expect(sent.length).toBeGreaterThanOrEqual(4);
    expect(sent.length).toBeLessThanOrEqual(7);
    for (let i = 1; i < sent.length; i++) expect(sent[i]!.at - sent[i - 1]!.at).toBeGreaterThanOrEqual(1_900);
    // the waits were spent with the slot free, as re-checks
    expect(stack.logs.records.some((r) => r.message === 'worker.provider.create_refused' && r.executionId === id)).toBe(true);
    expect(sent.at(-1)!.headers['cancel-after']).toMatch(/^\d+s$/);
    expect(await projectBalance(stack.db, p.projectId)).toEqual({ available: 96_000, reserved: 0 });
  });

  it('still refused at the job deadline: provider_error, nothing created, nothing charged', async () => {
    const p = await stack.seed({ creditMicros: 100_000 });
    const prompt = 'throttled for good [throttle:600000:2]';
    const id = await submit(p.secret, 'image.generate', { model: 'replicate/flux-schnell', prompt });
    const done = await wait(id, p.secret);
    expect(done).toMatchObject({ status: 'failed', errorCode: 'provider_error', chargedMicros: 0 });
    expect(sentWith(prompt).at(-1)!.at - sentWith(prompt)[0]!.at).toBeLessThan(JOB_TIMEOUT_MS);
    expect(await projectBalance(stack.db, p.projectId)).toEqual({ available: 100_000, reserved: 0 });
  });

  it('a worker that stops while waiting out a refusal is resumed by a send, not handed to an operator', async () => {
    const p = await stack.seed({ creditMicros: 100_000 });
    await stack.stopWorker();
    const prompt = 'refused before the crash';
    const id = await submit(p.secret, 'image.generate', { model: 'replicate/flux-schnell', prompt });
    // what a worker leaves behind when it stops right after recording the refusal
    const now = Date.now();
    await stack
      .db('executions')
      .where({ id })
      .update({ status: 'running', attempts: 1, claims: 1, lease_owner: 'wrk_gone', lease_expires_at: stack.db.raw("now() - interval '1 second'") });
    await stack.db('execution_steps').insert({
      execution_id: id,
      project_id: p.projectId,
      index: 0,
      name: 'generate',
      status: 'running',
      external: true,
      checkpoint: JSON.stringify({ submittedAt: now, createAfter: now, refusals: 1, unsent: true }),
    });
    await stack.startWorker();
    expect(await wait(id, p.secret)).toMatchObject({ status: 'succeeded', chargedMicros: 4_000 });
    expect(sentWith(prompt).filter((r) => r.method === 'POST')).toHaveLength(1);
  });
});

describe('OpenAI speech: 429', () => {
  it('is waited out through the delay queue as well: one accepted request, charged', async () => {
    const p = await stack.seed({ creditMicros: 100_000 });
    const text = 'a busy voice [throttle:5000:2]';
    const id = await submit(p.secret, 'audio.speech', { model: 'openai/gpt-4o-mini-tts', text, voice: 'coral', format: 'wav' });
    expect(await wait(id, p.secret)).toMatchObject({ status: 'succeeded', chargedMicros: 20_000 });
    expect(stack.logs.records.some((r) => r.message === 'worker.provider.create_refused' && r.executionId === id)).toBe(true);
    expect(await projectBalance(stack.db, p.projectId)).toEqual({ available: 80_000, reserved: 0 });
  });
});
