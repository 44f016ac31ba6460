import type { Knex } from 'knex';
import { monthKey } from './time';

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

export async function getUsage(
  db: Knex,
  projectId: string,
  at: Date = new Date(),
): Promise<{ requestCount: number; executionCount: number; chargedMicros: number }> {
  const row = await db<{ project_id: string; month: string; request_count: number; execution_count: number; charged_micros: number }>('usage_counters')
    .select('request_count', 'execution_count', 'charged_micros')
    .where({ project_id: projectId, month: monthKey(at) })
    .first();
  return { requestCount: row?.request_count ?? 0, executionCount: row?.execution_count ?? 0, chargedMicros: row?.charged_micros ?? 0 };
}
