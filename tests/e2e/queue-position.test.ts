import { bearer, useStack, waitForExecution } from '../stack';
import { openEvents } from '../sse';

/**
 * The caller sees its place in line (issue #25): while an execution is queued, GET, the list and
 * the event stream carry progress.queuePosition (and estimatedStartAt, null while nothing of the
 * category started lately); once a worker runs it, they are gone. The stack starts without a
 * worker, so everything submitted stays queued until the test starts one (with one slot).
 */
const stack = useStack({ worker: false });

async function submit(secret: string, key: string, seconds: number): Promise<string> {
  const args = { seconds, steps: 1, costMicrosPerStep: 10 };
  const q = await stack.http().post('/tools/quote').set(bearer(secret)).send({ tool: 'test.sleep', arguments: args });
  const res = await stack
    .http()
    .post('/tools/test.sleep')
    .set({ ...bearer(secret), 'Idempotency-Key': key })
    .send({ tool: 'test.sleep', arguments: args, priceVersion: q.body.data.priceVersion, maximumChargeMicros: q.body.data.maximumChargeMicros });
  expect(res.status).toBe(202);
  return res.body.data.id as string;
}

interface Progress {
  queuePosition?: number;
  estimatedStartAt?: string | null;
}
const progressOf = (e: Record<string, unknown>) => e.progress as Progress;

it('a queued execution shows its place in the fair order in GET, the list and its event stream, and loses it once running', async () => {
  const noisy = await stack.seed({ creditMicros: 1_000_000 });
  const quiet = await stack.seed({ creditMicros: 1_000_000 });
  const noisyIds: string[] = [];
  for (let i = 0; i < 3; i++) noisyIds.push(await submit(noisy.secret, `queue-position-noisy-${i}`, 2));
  const quietId = await submit(quiet.secret, 'queue-position-quiet-0', 0.2);

  // the fair order from here: noisy's first (the oldest head), then quiet's (fewer running), then noisy's others
  const got = await stack.http().get(`/tools/executions/${quietId}`).set(bearer(quiet.secret));
  expect(got.body.data.status).toBe('queued');
  expect(progressOf(got.body.data)).toEqual({ completedSteps: 0, totalSteps: 1, currentStep: null, queuePosition: 2, estimatedStartAt: null });
  const list = await stack.http().get('/tools/executions').set(bearer(noisy.secret));
  expect(list.body.data.map((e: Record<string, unknown>) => [e.id, progressOf(e).queuePosition])).toEqual([
    [noisyIds[2], 4],
    [noisyIds[1], 3],
    [noisyIds[0], 1],
  ]);

  const stream = await openEvents(`${stack.baseUrl}/tools/executions/${quietId}/events`, bearer(quiet.secret));
  const [first] = await stream.next(1, 2_000);
  expect(progressOf(first!.data).queuePosition).toBe(2);

  // one slot: noisy's first runs (2 s each), and quiet's execution moves up to 1 (the stream says so within its 5 s refresh)
  await stack.startWorker({ WORKER_QUEUES: 'test:1' });
  const until = Date.now() + 15_000;
  while (!stream.events.some((e) => e.data.status === 'queued' && progressOf(e.data).queuePosition === 1) && Date.now() < until)
    await new Promise((r) => setTimeout(r, 100));
  const moved = stream.events.find((e) => e.data.status === 'queued' && progressOf(e.data).queuePosition === 1);
  expect(moved).toBeDefined();
  // a category that started work lately has an estimated start, in the future of the first start
  const running = await waitForExecution(stack, noisy.secret, noisyIds[0]!, (e) => e.status !== 'queued');
  expect(progressOf(running)).not.toHaveProperty('queuePosition');
  const stillQueued = await stack.http().get(`/tools/executions/${quietId}`).set(bearer(quiet.secret));
  if (stillQueued.body.data.status === 'queued') {
    expect(Date.parse(progressOf(stillQueued.body.data).estimatedStartAt!)).toBeGreaterThanOrEqual(Date.parse(running.startedAt as string));
  }

  // once it runs, the place is gone: in the stream's events and in GET
  await stream.ended;
  const notQueued = stream.events.filter((e) => e.data.status !== 'queued');
  expect(notQueued.length).toBeGreaterThan(0);
  for (const e of notQueued) expect(progressOf(e.data)).not.toHaveProperty('queuePosition');
  const done = await waitForExecution(stack, quiet.secret, quietId);
  expect(done.status).toBe('succeeded');
  expect(progressOf(done)).not.toHaveProperty('queuePosition');
  expect(progressOf(done)).not.toHaveProperty('estimatedStartAt');
  for (const id of noisyIds) await waitForExecution(stack, noisy.secret, id);
}, 60_000);
