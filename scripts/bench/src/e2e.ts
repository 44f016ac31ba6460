import path from 'node:path';
import pg from 'pg';
import type { Db } from '@tes/db';
import { runLoad, type LoadResult, type LoadSpec } from './http-load';
import { CpuMeter, RssSampler } from './meter';
import type { BenchOptions } from './options';
import { sleep, startNode, stopChild } from './procs';
import type { ServiceStack } from './stack';

/**
 * B5 (end-to-end test.sleep executions/s, accept→running/succeeded latencies), its pg-boss
 * baseline, and B6 (RSS of each service process while B5 runs).
 *
 * Capacity, ours and pg-boss's alike: producers submit/send as fast as they are answered
 * with `concurrency` connections, but only while fewer than 2 × `concurrency` units are
 * unfinished (window.ts), while a consumer with `concurrency` slots works; the figure
 * is completions whose finish time falls in the last `durationSec` seconds of the load,
 * divided by `durationSec` (the warmup before that is not counted). Timestamps are the
 * database's own (created_at, started_at, finished_at; pg-boss's created_on/completed_on).
 */
export interface E2eResult {
  perSec: number;
  load: LoadResult;
  failed: number;
  /** Messages of B3/B4's submits dropped before B5 (no worker ran during those). */
  stalePurged: number;
  /** Messages dropped after the capacity phase because its backlog did not drain in time. */
  backlogPurged: number;
  half?: {
    rate: number;
    load: LoadResult;
    n: number;
    unfinished: number;
    /** accept → broker confirmed (outbox.published_at, set after the confirm): the gateway's half of accept→running. */
    pubP50: number;
    pubP99: number;
    runP50: number;
    runP99: number;
    doneP50: number;
    doneP99: number;
    /** p50/p99 of each leg, ms: running→step start, the step (incl. the S3 put), step end→succeeded (settle). */
    legs: Record<string, [number, number]>;
  };
  rss: Record<string, { peakMb: number; meanMb: number }>;
  /** RSS of each service right after its start, before any load. */
  startRss: Record<string, number>;
  cpu: Record<string, number>;
  halfCpu?: Record<string, number>;
}

/**
 * The legs of accept→succeeded after the claim (names lower case: they are SQL aliases). The
 * broker confirm is not a leg on the way: a quorum queue delivers to the consumer as soon as
 * it has the message and confirms to the publisher only after its log is fsynced, so the
 * worker usually claims before the confirm arrives.
 */
const LEGS: [string, string][] = [
  ['tostep', 's.started_at - e.started_at'],
  ['step', 's.finished_at - s.started_at'],
  ['settle', 'e.finished_at - s.finished_at'],
];
const leg = (name: string, interval: string) =>
  `percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM ${interval}) * 1000) AS ${name}50, ` +
  `percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM ${interval}) * 1000) AS ${name}99`;

export async function dbNow(db: Db): Promise<Date> {
  const r = await db.raw<{ rows: { t: Date }[] }>('SELECT clock_timestamp() AS t');
  return r.rows[0]!.t;
}

/** Units of work B5's capacity runs keep outstanding, ours and pg-boss's: twice the concurrency. */
const windowFor = (o: BenchOptions): number => 2 * o.concurrency;

const CROCKFORD = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';

/**
 * The smallest execution id a gateway could give at `at` less a second of clock skew (a ULID
 * starts with its time). The harness's counts read executions by primary key from there: by
 * `created_at` alone they read the whole table, a million rows of history per poll (14 ms and
 * 8,800 buffers a call at 1 M executions), load the empty database did not carry.
 */
function firstIdSince(at: Date, prefix = 'exe'): string {
  let ms = at.getTime() - 1_000;
  let time = '';
  for (let i = 0; i < 10; i++, ms = Math.floor(ms / 32)) time = CROCKFORD[ms % 32]! + time;
  return `${prefix}_${time}`;
}

/** Waits (bounded) until no execution accepted since `since` is queued or running; returns how many still are. */
export async function drain(db: Db, since: Date, limitSec: number): Promise<number> {
  const until = Date.now() + limitSec * 1000;
  for (;;) {
    const r = await db.raw<{ rows: { n: string }[] }>(
      `SELECT count(*) AS n FROM executions WHERE id >= ? AND created_at >= ? AND status IN ('queued', 'running')`,
      [firstIdSince(since), since],
    );
    const n = Number(r.rows[0]!.n);
    if (n === 0 || Date.now() > until) return n;
    await sleep(250);
  }
}

export async function runB5(
  stack: ServiceStack,
  spec: Omit<LoadSpec, 'connections' | 'warmupSec' | 'durationSec'>,
  o: BenchOptions,
  logDir: string,
  meter: CpuMeter,
): Promise<E2eResult> {
  // B3/B4's submits, run with no worker: their messages go, their executions stay queued
  // in this throwaway database and every query below looks only at executions since `since`.
  const stale = await stack.purgeTestQueue();
  const since = await dbNow(stack.db);
  const worker = await stack.startWorker();
  meter.label(worker.pid, 'worker');
  const rss = new RssSampler({ gateway: stack.gateway.pid, worker: worker.pid, relay: stack.relay.pid });
  rss.start();
  try {
    const { perSec, load, cpu } = await measureCapacity(stack, spec, o, logDir, meter, 'b5-capacity');
    let backlogPurged = 0;
    if ((await drain(stack.db, since, o.drainLimitSec)) > 0) backlogPurged = await stack.purgeTestQueue();

    const result: E2eResult = { perSec, load, failed: 0, stalePurged: stale, backlogPurged, rss: {}, startRss: stack.startRssMb, cpu };
    if (perSec >= 2) await atHalf(stack, spec, o, logDir, meter, Math.max(1, Math.floor(perSec / 2)), result);
    result.rss = rss.stop();
    const failed = await stack.db.raw<{ rows: { n: string }[] }>(
      `SELECT count(*) AS n FROM executions WHERE id >= ? AND created_at >= ? AND status IN ('failed', 'needs_review')`,
      [firstIdSince(since), since],
    );
    result.failed = Number(failed.rows[0]!.n);
    return result;
  } finally {
    rss.stop();
    meter.stop();
    await stack.stopWorker();
  }
}

/**
 * The capacity run (B5's, and B8/B9's half load when B5 did not run): test.sleep submits with
 * the window of outstanding work; executions/s that finished in the measured part. The worker
 * must be running; the caller drains the backlog.
 */
export async function measureCapacity(
  stack: ServiceStack,
  spec: Omit<LoadSpec, 'connections' | 'warmupSec' | 'durationSec'>,
  o: BenchOptions,
  logDir: string,
  meter: CpuMeter,
  name: string,
): Promise<{ perSec: number; load: LoadResult; cpu: Record<string, number> }> {
  meter.start();
  try {
    // settled executions are counted per project and month in usage_counters: a few rows to sum,
    // those of this run's tenants (made after the stack started; ids are time-ordered). Summed
    // over every project, a kept history's 20,000 counter rows cost 5.6 ms a read, 100 reads a
    // second: load on the history side's database the empty side did not carry (B5, --history)
    const window = {
      databaseUrl: stack.databaseUrl,
      finishedSql: 'SELECT coalesce(sum(execution_count), 0) AS n FROM usage_counters WHERE project_id >= $1',
      params: [firstIdSince(stack.startedAt, 'prj')],
      limit: windowFor(o),
    };
    const load = await runLoad({ ...spec, connections: o.concurrency, warmupSec: o.warmupSec, durationSec: o.durationSec, window }, { logDir, name, meter });
    const t1 = await dbNow(stack.db);
    const cpu = meter.stop();
    const counted = await stack.db.raw<{ rows: { n: string }[] }>(
      `SELECT count(*) AS n FROM executions WHERE status = 'succeeded' AND finished_at > ?::timestamptz - make_interval(secs => ?) AND finished_at <= ?`,
      [t1, o.durationSec, t1],
    );
    return { perSec: Number(counted.rows[0]!.n) / o.durationSec, load, cpu };
  } finally {
    meter.stop();
  }
}

/** Submits at `rate`/s, then the latency of every leg for the executions accepted in the measured part. */
async function atHalf(
  stack: ServiceStack,
  spec: Omit<LoadSpec, 'connections' | 'warmupSec' | 'durationSec'>,
  o: BenchOptions,
  logDir: string,
  meter: CpuMeter,
  rate: number,
  result: E2eResult,
): Promise<void> {
  meter.start();
  const halfStart = await dbNow(stack.db);
  const halfLoad = await runLoad(
    { ...spec, connections: o.concurrency, warmupSec: o.warmupSec, durationSec: o.durationSec, overallRate: rate },
    { logDir, name: 'b5-half', meter },
  );
  const halfEnd = await dbNow(stack.db);
  result.halfCpu = meter.stop();
  await drain(stack.db, halfStart, o.drainLimitSec);
  // The outbox rows are read by their publish time (outbox_published_idx) and grouped once: a
  // lookup by execution_id has no index, and with history (--history) the planner ran it as a
  // sequential scan of the whole outbox per execution
  const q = await stack.db.raw<{ rows: Record<string, string | null>[] }>(
    `WITH o AS (
       SELECT execution_id, min(published_at) AS published_at FROM outbox
        WHERE published_at >= ?::timestamptz - interval '1 minute'
        GROUP BY execution_id
     )
     SELECT count(*) AS n,
            count(*) FILTER (WHERE e.finished_at IS NULL) AS unfinished,
            ${leg('pub', 'o.published_at - e.created_at')},
            ${leg('run', 'e.started_at - e.created_at')},
            ${leg('done', 'e.finished_at - e.created_at')},
            ${LEGS.map(([name, interval]) => leg(name, interval)).join(',\n            ')}
       FROM executions e
       LEFT JOIN o ON o.execution_id = e.id
       LEFT JOIN execution_steps s ON s.execution_id = e.id AND s.index = 0
      WHERE e.created_at > greatest(?::timestamptz, ?::timestamptz - make_interval(secs => ?)) AND e.created_at <= ?`,
    [halfStart, halfStart, halfEnd, o.durationSec, halfEnd],
  );
  const row = q.rows[0]!;
  result.half = {
    rate,
    load: halfLoad,
    n: Number(row.n),
    unfinished: Number(row.unfinished),
    pubP50: Number(row.pub50),
    pubP99: Number(row.pub99),
    runP50: Number(row.run50),
    runP99: Number(row.run99),
    doneP50: Number(row.done50),
    doneP99: Number(row.done99),
    legs: Object.fromEntries(LEGS.map(([l]) => [l, [Number(row[`${l}50`]), Number(row[`${l}99`])]])),
  };
}

export interface PgBossResult {
  perSec: number;
  sent: number;
  completed: number;
  cpu: Record<string, number>;
}

/** pg-boss send → work → complete on the same Postgres (the scratch database, schema pgboss). */
export async function runPgBoss(databaseUrl: string, o: BenchOptions, logDir: string, meter: CpuMeter): Promise<PgBossResult> {
  const script = path.join(__dirname, 'pgboss-child.js');
  const queue = 'bench-executions';
  const env = { DATABASE_URL: databaseUrl, BENCH_QUEUE: queue, BENCH_CONCURRENCY: String(o.concurrency), BENCH_WINDOW: String(windowFor(o)) };
  const setup = startNode('pgboss-setup', script, { args: ['setup'], env, logDir, capture: true });
  if ((await setup.exited).code !== 0) throw new Error(`pg-boss setup failed; see ${setup.logFile}`);

  const work = startNode('pgboss-work', script, { args: ['work'], env: { ...env, BENCH_SECONDS: '600' }, logDir, capture: true });
  meter.label(work.pid, 'pgboss-work');
  const c = new pg.Client({ connectionString: databaseUrl });
  await c.connect();
  try {
    meter.start();
    const send = startNode('pgboss-send', script, {
      args: ['send'],
      env: { ...env, BENCH_SECONDS: String(o.warmupSec + o.durationSec) },
      logDir,
      capture: true,
    });
    meter.label(send.pid, 'pgboss-send');
    const sendExit = await send.exited;
    const t1 = (await c.query<{ t: Date }>('SELECT clock_timestamp() AS t')).rows[0]!.t;
    const cpu = meter.stop();
    if (sendExit.code !== 0) throw new Error(`pg-boss send failed; see ${send.logFile}`);
    const n = await c.query<{ n: string }>(
      `SELECT count(*) AS n FROM pgboss.job WHERE name = $1 AND state = 'completed'
          AND completed_on > $2::timestamptz - make_interval(secs => $3) AND completed_on <= $2`,
      [queue, t1, o.durationSec],
    );
    await stopChild(work);
    const sent = Number((JSON.parse(send.stdout().trim() || '{}') as { sent?: unknown }).sent ?? 0);
    const completed = Number((JSON.parse(work.stdout().trim() || '{}') as { completed?: unknown }).completed ?? 0);
    return { perSec: Number(n.rows[0]!.n) / o.durationSec, sent, completed, cpu };
  } finally {
    await stopChild(work);
    await c.end();
  }
}
