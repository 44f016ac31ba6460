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
 * the queued and the running executions now (execution_line, migration 20261127000020: the live
 * line and nothing else), never the history of executions. Which projects those are: categoryQueue
 * (fair-share.ts, `admin queue show`).
 */
export async function categoryQueueStates(db: Knex): Promise<CategoryQueueState[]> {
  const res = await db.raw<{ rows: { category: string; queued: string; running: string; oldest_age: number | null }[] }>(
    `SELECT category, sum(queued) AS queued, sum(running) AS running,
            max(extract(epoch FROM tes_now() - oldest))::float8 AS oldest_age
       FROM (
         SELECT category, count(*) AS queued, 0 AS running, min(created_at) AS oldest
           FROM execution_line WHERE status = 'queued' GROUP BY category
         UNION ALL
         SELECT category, 0, count(*), NULL
           FROM execution_line WHERE status = 'running' GROUP BY category
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
