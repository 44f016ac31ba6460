import type { Knex } from 'knex';
import { monthKey } from './time';

export async function countRequest(db: Knex, projectId: string, n = 1): Promise<void> {
  await db.raw(
    `INSERT INTO usage_counters (project_id, month, request_count) VALUES (?, ?::date, ?)
     ON CONFLICT (project_id, month) DO UPDATE SET request_count = usage_counters.request_count + excluded.request_count`,
    [projectId, monthKey(), n],
  );
}

export async function getUsage(db: Knex, projectId: string, at: Date = new Date()): Promise<{ requestCount: number; executionCount: number; chargedMicros: number }> {
  const row = await db('usage_counters')
    .select('request_count', 'execution_count', 'charged_micros')
    .where({ project_id: projectId, month: monthKey(at) })
    .first();
  return { requestCount: row?.request_count ?? 0, executionCount: row?.execution_count ?? 0, chargedMicros: row?.charged_micros ?? 0 };
}
