import { addKey } from '@tes/testing';
import { bearer, useStack } from '../stack';
import { openEvents, type SseStream } from '../sse';

/**
 * Held connections are shared fairly (issue #25: one project with 21 keys opened 2,404 event
 * streams in 4.9 s, all 200, and held ~420 `Prefer: wait` requests; nothing bounded them). Small
 * shares here: 8 per process, 4 per organization, 4 per project. No worker: the executions stay
 * queued (never terminal), so every stream and wait is held until the test ends it.
 */
const stack = useStack({
  worker: false,
  env: { HELD_CONNECTIONS_PER_PROCESS: '8', HELD_CONNECTIONS_PER_ORGANIZATION: '4', HELD_CONNECTIONS_PER_PROJECT: '4' },
});

const sleepArgs = { seconds: 1, steps: 1, costMicrosPerStep: 10 };

/** A project with `keys` keys and one queued execution. */
async function projectWithExecution(keys = 1): Promise<{ projectId: string; secrets: string[]; executionId: string }> {
  const p = await stack.seed({ creditMicros: 1_000_000 });
  const secrets = [p.secret];
  for (let i = 1; i < keys; i++) secrets.push((await addKey(stack.db, p.projectId, { name: `key ${i}` })).secret);
  const q = await stack.http().post('/tools/quote').set(bearer(p.secret)).send({ tool: 'test.sleep', arguments: sleepArgs });
  const res = await stack
    .http()
    .post('/tools/test.sleep')
    .set({ ...bearer(p.secret), 'Idempotency-Key': `held-${p.projectId}` })
    .send({ tool: 'test.sleep', arguments: sleepArgs, priceVersion: q.body.data.priceVersion, maximumChargeMicros: q.body.data.maximumChargeMicros });
  expect(res.status).toBe(202);
  return { projectId: p.projectId, secrets, executionId: res.body.data.id as string };
}

type Stream = SseStream & { done?: boolean };
const streams: Stream[] = [];
async function stream(secret: string, executionId: string): Promise<Stream> {
  const s: Stream = await openEvents(`${stack.baseUrl}/tools/executions/${executionId}/events`, bearer(secret));
  void s.ended.then(() => (s.done = true));
  streams.push(s);
  return s;
}
/** Streams open now (answered 200 and not ended), of `among` or all. */
const open = (among: Stream[] = streams) => among.filter((s) => s.status === 200 && !s.done).length;
afterEach(() => {
  for (const s of streams.splice(0)) s.close();
});

/** A GET with Prefer: wait, timed. */
async function waitGet(secret: string, executionId: string, seconds: number) {
  const started = Date.now();
  const res = await stack
    .http()
    .get(`/tools/executions/${executionId}`)
    .set({ ...bearer(secret), Prefer: `wait=${seconds}` });
  return { res, ms: Date.now() - started };
}

it("a flood of streams and waits from one project with many keys gets 429 + Retry-After beyond its share; another project's stream and wait go through; the process cap holds", async () => {
  const flood = await projectWithExecution(6);
  // 20 streams at once over 6 keys: 4 (its share) open, the rest 429 with the rate-limit envelope
  const opened = await Promise.all(Array.from({ length: 20 }, (_, i) => stream(flood.secrets[i % 6]!, flood.executionId)));
  const statuses = opened.map((s) => s.status).sort();
  expect(statuses.filter((s) => s === 200)).toHaveLength(4);
  expect(statuses.filter((s) => s === 429)).toHaveLength(16);
  for (const s of opened.filter((o) => o.status === 429)) expect(Number(s.headers.get('retry-after'))).toBeGreaterThan(0);
  const refused = await fetch(`${stack.baseUrl}/tools/executions/${flood.executionId}/events`, { headers: bearer(flood.secrets[5]!) });
  expect(refused.status).toBe(429);
  expect(refused.headers.get('cache-control')).toBe('no-store');
  expect(await refused.json()).toEqual({
    error: {
      status: 'RESOURCE_EXHAUSTED',
      message: 'rate_limit_exceeded',
      details: { reason: 'too many open event streams and waits for this project', share: 'project', limit: 4 },
    },
  });
  // its waits beyond the share are answered at once, as without the header (no Preference-Applied)
  const waits = await Promise.all(Array.from({ length: 6 }, (_, i) => waitGet(flood.secrets[i]!, flood.executionId, 30)));
  for (const { res, ms } of waits) {
    expect(res.status).toBe(200);
    expect(res.body.data.status).toBe('queued');
    expect(res.headers['preference-applied']).toBeUndefined();
    expect(ms).toBeLessThan(2_000);
  }

  // another project: its stream opens, and its wait is held and honoured
  const other = await projectWithExecution();
  const otherStream = await stream(other.secrets[0]!, other.executionId);
  expect(otherStream.status).toBe(200);
  await otherStream.next(1, 2_000);
  const waiting = waitGet(other.secrets[0]!, other.executionId, 30);
  await new Promise((r) => setTimeout(r, 300));
  const cancel = await stack.http().post(`/tools/executions/${other.executionId}/cancel`).set(bearer(other.secrets[0]!));
  expect(cancel.status).toBe(200);
  const { res: waited, ms } = await waiting;
  expect(waited.status).toBe(200);
  expect(waited.body.data.status).toBe('cancelled');
  expect(waited.headers['preference-applied']).toBe('wait=30');
  expect(ms).toBeLessThan(5_000);
  await otherStream.ended; // its stream ended after the terminal event

  // the process cap (8): two more projects fill it with the flood's 4
  const [g, h] = [await projectWithExecution(), await projectWithExecution()];
  for (const p of [g, h]) for (let i = 0; i < 2; i++) expect((await stream(p.secrets[0]!, p.executionId)).status).toBe(200);
  expect(open()).toBe(8);
  // a newcomer still gets its stream: the flood's oldest is preempted (it just ends; a client resumes)
  const late = await projectWithExecution();
  const lateStreams = [await stream(late.secrets[0]!, late.executionId), await stream(late.secrets[0]!, late.executionId)];
  expect(lateStreams.map((s) => s.status)).toEqual([200, 200]);
  await new Promise((r) => setTimeout(r, 200));
  expect(open()).toBe(8);
  expect(open(opened)).toBe(2);
  // every holder now holds two: the process is full for everyone, the flood included
  const third = await stream(late.secrets[0]!, late.executionId);
  expect(third.status).toBe(429);
  expect((await stream(flood.secrets[0]!, flood.executionId)).status).toBe(429);
  expect(open()).toBe(8);
  // a wait in the full process is answered at once, not refused
  const full = await waitGet(late.secrets[0]!, late.executionId, 30);
  expect([full.res.status, full.res.headers['preference-applied']]).toEqual([200, undefined]);
  expect(full.ms).toBeLessThan(2_000);
  // operators see the shares at work: 16 + 1 + 2 streams refused, 6 + 1 waits answered at once, 2 preempted
  const metrics = await (await fetch(`http://127.0.0.1:${stack.gatewayMetricsPort}/metrics`)).text();
  const series = (resource: string, outcome: string) =>
    Number(new RegExp(`^tes_fair_share_total\\{resource="${resource}",outcome="${outcome}",service="gateway"\\} (\\d+)$`, 'm').exec(metrics)?.[1]);
  expect([series('stream', 'refused'), series('wait', 'refused'), series('stream', 'preempted'), series('wait', 'preempted')]).toEqual([19, 7, 2, 0]);
});
