/**
 * Upkeep of execution_line (migration 20261127000020): the queued and running executions, kept
 * by triggers on executions, which the fair claim, the place in line and the queue gauges read.
 * The relay runs both of these every minute (state-metrics.ts). Each costs the live line, never
 * the history.
 */
import type { Knex } from 'knex';

const LINE = `('queued', 'running')`;

export interface LineRepair {
  /** Line rows whose execution is not in that state (removed). */
  removed: string[];
  /** Live executions the line lacked, or held in another state (written). */
  added: string[];
}

/**
 * Puts the line back in step with executions where the triggers were bypassed: a write with
 * `session_replication_role = replica`, a trigger disabled by hand, a logical replica's apply.
 * Without it one stale row would hold its category (the pick would choose it, the claim's
 * status guard refuse it, every claim return nothing) and a missing one would never be claimed.
 * Both sides are read in one snapshot, so a move committed meanwhile is seen on both or neither;
 * the live executions are read through the reaper's index (every live row has a deadline) and
 * the line by its primary key. Nothing to do is the normal outcome: anything else is logged.
 */
export async function repairExecutionLine(db: Knex): Promise<LineRepair> {
  const res = await db.raw<{ rows: { removed: string[] | null; added: string[] | null }[] }>(
    `WITH live AS (
       SELECT id, category, project_id, status, created_at FROM executions
        WHERE status IN ('queued', 'running', 'waiting') AND lease_expires_at IS NOT NULL AND status IN ${LINE}
     ), stale AS (
       DELETE FROM execution_line l
        WHERE NOT EXISTS (SELECT 1 FROM live e WHERE e.id = l.execution_id)
       RETURNING l.execution_id
     ), added AS (
       INSERT INTO execution_line (execution_id, category, project_id, status, created_at)
       SELECT e.id, e.category, e.project_id, e.status, e.created_at FROM live e
        WHERE NOT EXISTS (
          SELECT 1 FROM execution_line l
           WHERE l.execution_id = e.id AND l.status = e.status AND l.category = e.category
             AND l.project_id = e.project_id AND l.created_at = e.created_at
        )
       ON CONFLICT (execution_id) DO UPDATE
         SET status = EXCLUDED.status, category = EXCLUDED.category, project_id = EXCLUDED.project_id, created_at = EXCLUDED.created_at
       RETURNING execution_id
     )
     SELECT (SELECT array_agg(execution_id) FROM stale) AS removed, (SELECT array_agg(execution_id) FROM added) AS added`,
  );
  const row = res.rows[0];
  return { removed: row?.removed ?? [], added: row?.added ?? [] };
}

export interface LineVacuum {
  /** False when the role may not vacuum execution_line: nothing was done. */
  vacuumed: boolean;
  /** Dead rows the table held before (pg_stat's count, which VACUUM resets). */
  deadBefore: number;
}

/**
 * Vacuums and analyzes execution_line: every execution enters it and leaves it, so most of its
 * pages are dead rows a minute after its last vacuum. The vacuum costs the line, never history,
 * and cleans the table's indexes every time (INDEX_CLEANUP ON; the partial index of executions
 * it replaces kept its dead entries until a manual cleanup). The relay runs it every minute;
 * autovacuum, where it is on, also does after 2,000 changes (the table's own thresholds).
 *
 * It gives the table's empty tail back (VACUUM's truncation): left in place, a line of 12 in a
 * table of 13 pages was read by sequential scans, once per project (172 buffers a claim against
 * 14 once truncated, measured with execution-line.test.ts's line). The truncation's ACCESS EXCLUSIVE lock is only
 * taken when no writer holds the table, and VACUUM gives it up within 20 ms of a writer waiting
 * for it: a submit or settle waits at most that long, once a minute. SKIP_LOCKED: another relay's vacuum under way is
 * as good, and it never waits. VACUUM only warns when the role may not vacuum the table (not its
 * owner nor the database's, nor granted MAINTAIN where PostgreSQL 17 has it), so that is asked first.
 */
export async function vacuumExecutionLine(db: Knex): Promise<LineVacuum> {
  const r = await db.raw<{ rows: { may: boolean; dead: string | null }[] }>(
    `SELECT pg_has_role(c.relowner, 'USAGE')
            OR pg_has_role((SELECT datdba FROM pg_database WHERE datname = current_database()), 'USAGE')
            OR (CASE WHEN current_setting('server_version_num')::int >= 170000 THEN has_table_privilege(c.oid, 'MAINTAIN') ELSE false END) AS may,
            pg_stat_get_dead_tuples(c.oid) AS dead
       FROM pg_class c WHERE c.oid = 'execution_line'::regclass`,
  );
  const row = r.rows[0];
  const deadBefore = Number(row?.dead ?? 0);
  if (!row?.may) return { vacuumed: false, deadBefore };
  await db.raw('VACUUM (ANALYZE, SKIP_LOCKED, INDEX_CLEANUP ON) execution_line');
  return { vacuumed: true, deadBefore };
}
