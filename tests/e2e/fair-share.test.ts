import { randomUUID } from 'node:crypto';
import { auditLedger } from '@tes/db';
import { addKey, seedProject } from '@tes/testing';
import { Cluster, sleep, type Instance } from '../faults/cluster';

/**
 * Fair share of the worker slots (issue #25): one project floods a category with 60 two-second
 * executions from two keys, then another project submits one 0.2 s execution. It must end
 * within 5 s of its submit (the issue measured 29.7 s when the queue was first-in first-out
 * across projects), with 1, 2 and 3 workers of concurrency 4, and when a worker is killed
 * (SIGKILL) in the middle of the flood. Every execution ends, in a bounded time: the dispatch
 * deadline is set far beyond the test, so the flood's work beyond its project's limit (whose
 * messages found nothing claimable) is started only by slots that take the next execution
 * when they end one, and the killed worker's work only by the lease reaper.
 *
 * The compiled services run as processes (tests/faults/cluster.ts): `npm run build` first.
 */
const figures: Record<string, Record<string, number>> = {};

afterAll(() => {
  process.stdout.write(
    `\nfair share figures (ms):\n${Object.entries(figures)
      .map(([k, f]) => `  ${k}: ${JSON.stringify(f)}`)
      .join('\n')}\n`,
  );
});

interface Caller {
  base: string;
  secret: string;
  priceVersion: string;
}

async function submit(c: Caller, key: string, seconds: number): Promise<string> {
  const res = await fetch(`${c.base}/tools/test.sleep`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${c.secret}`, 'Idempotency-Key': `${key}-${randomUUID()}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ tool: 'test.sleep', arguments: { seconds, steps: 1, costMicrosPerStep: 1 }, priceVersion: c.priceVersion, maximumChargeMicros: 10 }),
  });
  const body = (await res.json()) as { data: { id: string } };
  if (res.status !== 202) throw new Error(`submit: ${res.status} ${JSON.stringify(body)}`);
  return body.data.id;
}

/** Polls the database until the execution ended; its submit-to-end time by the database's clock. */
async function ended(cluster: Cluster, id: string, timeoutMs: number): Promise<{ status: string; ms: number }> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const row = await cluster.db('executions').where({ id }).first('status', cluster.db.raw('extract(epoch FROM finished_at - created_at) * 1000 AS ms'));
    if (['succeeded', 'failed', 'cancelled', 'needs_review'].includes(row.status)) return { status: row.status, ms: Math.round(Number(row.ms)) };
    if (Date.now() > until) return { status: row.status, ms: Infinity };
    await sleep(100);
  }
}

async function caller(cluster: Cluster, secret: string): Promise<Caller> {
  const res = await fetch(`${cluster.baseUrl}/tools`, { headers: { Authorization: `Bearer ${secret}` } });
  const body = (await res.json()) as { data: { priceVersion: string } };
  return { base: cluster.baseUrl, secret, priceVersion: body.data.priceVersion };
}

async function flood(workers: number, kill: boolean): Promise<void> {
  const name = `${workers} worker${workers > 1 ? 's' : ''}${kill ? ', one killed' : ''}`;
  const cluster = await Cluster.start({
    env: { WORKER_CONCURRENCY: '4', WORKER_QUEUES: 'test', DISPATCH_DEADLINE_MS: '600000', RATE_LIMIT_PER_MINUTE: '100000' },
  });
  try {
    for (let i = 2; i <= workers; i++) await cluster.start(`worker#${i}` as Instance);
    const a = await seedProject(cluster.db, { creditMicros: 10_000_000 });
    const aSecond = await addKey(cluster.db, a.projectId, { name: 'second key' });
    const b = await seedProject(cluster.db, { creditMicros: 10_000_000 });
    const [a1, a2, bc] = await Promise.all([caller(cluster, a.secret), caller(cluster, aSecond.secret), caller(cluster, b.secret)]);

    // the quiet project alone first: its figure on an idle system
    const idle = await ended(cluster, await submit(bc, 'idle', 0.2), 20_000);
    expect(idle.status).toBe('succeeded');

    const floodIds: string[] = [];
    for (let batch = 0; batch < 6; batch++) {
      floodIds.push(...(await Promise.all(Array.from({ length: 10 }, (_, i) => submit(i % 2 ? a2 : a1, `flood-${batch}-${i}`, 2)))));
    }
    if (kill) {
      await sleep(1_000);
      const exit = await cluster.kill(`worker#${workers}` as Instance);
      expect(exit?.signal).toBe('SIGKILL');
    }
    const quiet = await ended(cluster, await submit(bc, 'quiet', 0.2), 60_000);
    const figure: Record<string, number> = { idle: idle.ms, quietDuringFlood: quiet.ms };
    figures[name] = figure;
    expect(quiet.status).toBe('succeeded');
    expect(quiet.ms).toBeLessThan(5_000);

    // every execution ends, with the dispatch deadline out of the way
    const started = Date.now();
    const results = await Promise.all(floodIds.map((id) => ended(cluster, id, 150_000)));
    figure.floodDrained = Date.now() - started;
    expect(results.filter((r) => r.status !== 'succeeded')).toEqual([]);
    expect((await auditLedger(cluster.db)).problems).toEqual([]);
  } finally {
    await cluster.shutdown();
  }
}

it('with one worker the quiet project ends within 5 s of its submit behind a 60-execution flood', () => flood(1, false), 240_000);
it('with two workers', () => flood(2, false), 240_000);
it('with three workers', () => flood(3, false), 240_000);
it('with two workers, one of them killed (SIGKILL) in the middle of the flood', () => flood(2, true), 240_000);
