import type { Knex } from 'knex';

/** Adds request counts for many projects in one statement (this month). */
export async function countRequests(db: Knex, counts: ReadonlyMap<string, number>): Promise<void> {
  if (counts.size === 0) return;
  const rows = [...counts].sort(([a], [b]) => a.localeCompare(b)); // a stable lock order across gateways
  await db.raw(
    `INSERT INTO usage_counters (project_id, month, request_count)
     SELECT p, tes_month(), n FROM unnest(:projectIds::text[], :counts::bigint[]) AS t(p, n)
     ON CONFLICT (project_id, month) DO UPDATE SET request_count = usage_counters.request_count + excluded.request_count`,
    { projectIds: rows.map(([p]) => p), counts: rows.map(([, n]) => n) },
  );
}

/**
 * A project's usage this month, and the month: both from the database's clock (tes_month()),
 * the one the counters and the cap are written with. A process clock would name another month
 * around a boundary, or always when the clocks disagree, and show its (empty) counters.
 */
export async function getUsage(
  db: Knex,
  projectId: string,
): Promise<{ period: { start: Date; end: Date }; requestCount: number; executionCount: number; chargedMicros: number }> {
  const res = await db.raw<{ rows: { start: Date; end: Date; request_count: number | null; execution_count: number | null; charged_micros: number | null }[] }>(
    `SELECT m.month::timestamp AT TIME ZONE 'UTC' AS start, (m.month + interval '1 month') AT TIME ZONE 'UTC' AS "end",
            u.request_count, u.execution_count, u.charged_micros
       FROM (SELECT tes_month() AS month) m
       LEFT JOIN usage_counters u ON u.project_id = :projectId AND u.month = m.month`,
    { projectId },
  );
  const row = res.rows[0]!;
  return {
    period: { start: row.start, end: row.end },
    requestCount: row.request_count ?? 0,
    executionCount: row.execution_count ?? 0,
    chargedMicros: row.charged_micros ?? 0,
  };
}
