import type { Knex } from 'knex';

/** One tool category's line and slots now, as the relay's gauges report them. */
export interface CategoryQueueState {
  category: string;
  queued: number;
  running: number;
  /** Seconds since the oldest queued execution was accepted, by the database clock; 0 when none is queued. */
  oldestQueuedAgeSeconds: number;
}

/**
 * Queued and running executions and the oldest queued age, per category that has any. Cost:
 * the queued and the running executions now (index-only scans of the partial indexes
 * executions_queued_position_idx and executions_running_category_idx, migration
 * 20261126000110), never the table's history.
 */
export async function categoryQueueStates(db: Knex): Promise<CategoryQueueState[]> {
  const res = await db.raw<{ rows: { category: string; queued: string; running: string; oldest_age: number | null }[] }>(
    `SELECT category, sum(queued) AS queued, sum(running) AS running,
            max(extract(epoch FROM tes_now() - oldest))::float8 AS oldest_age
       FROM (
         SELECT category, count(*) AS queued, 0 AS running, min(created_at) AS oldest
           FROM executions WHERE status = 'queued' GROUP BY category
         UNION ALL
         SELECT category, 0, count(*), NULL
           FROM executions WHERE status = 'running' GROUP BY category
       ) c
      GROUP BY category`,
  );
  return res.rows.map((r) => ({
    category: r.category,
    queued: Number(r.queued),
    running: Number(r.running),
    // a clock step may put the newest row a little in the future
    oldestQueuedAgeSeconds: Math.max(0, r.oldest_age ?? 0),
  }));
}

/** One project's share of a category: what it has queued and running there now. */
export interface CategoryHolder {
  category: string;
  organizationId: string;
  projectId: string;
  queued: number;
  running: number;
  /** Seconds its oldest queued execution of the category has waited (database clock); null when none is queued. */
  oldestQueuedAgeSeconds: number | null;
}

/**
 * The projects holding each category's line and slots now (the operator's question behind the
 * queue gauges, which carry no per-project label): most running first, then most queued. Cost:
 * the queued and running executions (the partial indexes of migration 20261126000110), never
 * history.
 */
export async function categoryHolders(db: Knex, category?: string): Promise<CategoryHolder[]> {
  const res = await db.raw<{
    rows: { category: string; organization_id: string; project_id: string; queued: string; running: string; oldest_age: number | null }[];
  }>(
    `SELECT c.category, p.organization_id, c.project_id, sum(c.queued) AS queued, sum(c.running) AS running,
            max(extract(epoch FROM tes_now() - c.oldest))::float8 AS oldest_age
       FROM (
         SELECT category, project_id, count(*) AS queued, 0 AS running, min(created_at) AS oldest
           FROM executions WHERE status = 'queued' AND (:category::text IS NULL OR category = :category::text)
          GROUP BY category, project_id
         UNION ALL
         SELECT category, project_id, 0, count(*), NULL
           FROM executions WHERE status = 'running' AND (:category::text IS NULL OR category = :category::text)
          GROUP BY category, project_id
       ) c
       JOIN projects p ON p.id = c.project_id
      GROUP BY c.category, p.organization_id, c.project_id
      ORDER BY c.category, sum(c.running) DESC, sum(c.queued) DESC, c.project_id`,
    { category: category ?? null },
  );
  return res.rows.map((r) => ({
    category: r.category,
    organizationId: r.organization_id,
    projectId: r.project_id,
    queued: Number(r.queued),
    running: Number(r.running),
    oldestQueuedAgeSeconds: r.oldest_age === null ? null : Math.max(0, r.oldest_age),
  }));
}
