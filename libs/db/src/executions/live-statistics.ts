import type { Knex } from 'knex';

/** How far the planner's count of live executions may drift from the real one before it is refreshed. */
const STALE_FACTOR = 10;
/** Below this many live executions on either side, any plan is cheap: no refresh. */
const STALE_FLOOR = 1_000;

export interface LiveStatistics {
  /** The planner's count of live executions (executions_lease_idx's reltuples at the last ANALYZE). */
  estimated: number;
  /** Whether this call ran ANALYZE. */
  analyzed: boolean;
}

/** True when the planner's count and the real one differ by more than STALE_FACTOR, above STALE_FLOOR. */
export const liveStatisticsStale = (live: number, estimated: number): boolean =>
  (live >= STALE_FLOOR && live > STALE_FACTOR * estimated) || (estimated >= STALE_FLOOR && estimated > STALE_FACTOR * live);

/**
 * Keeps the planner's view of the live executions (queued, running, waiting) near the truth
 * (issue #24). The partial index of those states (executions_lease_idx, the reaper's) is sized
 * for the planner by the table's last ANALYZE: analyzed while nothing was queued, they count as empty whatever they
 * hold since, and a plan that picks one "empty" index over the right one reads the whole line
 * per call (9 s per fair claim behind 21,000 queued at 1 M executions of history). Autovacuum
 * re-analyzes a table after a tenth of it changed: at 10 M executions, a million changes, hours
 * of traffic, while a line can grow from nothing to thousands in a minute.
 *
 * `live` is the count the relay's gauges read anyway (queued + running). When it and the
 * planner's count differ tenfold above a thousand, the table is analyzed: a sample of 30,000
 * rows at the default statistics target, so its cost does not grow with history. One relay at
 * a time (a try-lock: another relay's run is as good), never waited for. ANALYZE needs the
 * table's owner (or a superuser): a role without it gets the error, for the caller to report.
 */
export async function refreshLiveStatistics(db: Knex, live: number): Promise<LiveStatistics> {
  const est = await db.raw<{ rows: { estimated: number }[] }>(
    `SELECT greatest(reltuples, 0)::float8 AS estimated FROM pg_class WHERE oid = 'executions_lease_idx'::regclass`,
  );
  const estimated = est.rows[0]?.estimated ?? 0;
  if (!liveStatisticsStale(live, estimated)) return { estimated, analyzed: false };
  const analyzed = await db.transaction(async (trx) => {
    const lock = await trx.raw<{ rows: { ok: boolean }[] }>(`SELECT pg_try_advisory_xact_lock(hashtextextended('tes.analyze.executions', 0)) AS ok`);
    if (!lock.rows[0]?.ok) return false;
    await trx.raw('ANALYZE executions');
    return true;
  });
  return { estimated, analyzed };
}
