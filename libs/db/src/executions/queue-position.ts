/** A queued execution's place in line (issue #25): what `progress.queuePosition` and `progress.estimatedStartAt` show. */
import type { Knex } from 'knex';
import { iso } from '../time';
import type { ExecutionView, QueuePlace } from './records';

/** The starts of a category within this window give its recent start rate. */
const START_RATE_WINDOW_SECONDS = 300;

/**
 * The place in line of each of these executions that is queued now (the others are absent from
 * the map), read in one statement from the current queued and running counts of their
 * categories, never from history.
 *
 * The estimate follows the claim's fair order (the `fair-share` rule: the project with the fewest
 * executions of the category running goes first, ties to the oldest head; first-in first-out
 * within a project) as if nothing finished meanwhile. For execution X of project P, with k of
 * P's queued executions ahead of it and r_P of P's running: P starts X once it has started the
 * k before it, which the order lets it do when every other project Q with queued work has
 * caught up to r_P + k running. So Q starts n = r_P + k - r_Q of its queued first (none when
 * n < 0), one more if its next head is older than X (at n, Q and P tie on running, and the tie
 * goes to the oldest head), never more than Q has queued. Position = 1 + k + the sum of those counts.
 *
 * What it leaves out, so it is an estimate: executions ending (they free slots but change no
 * order), per-project and per-organization limits (a project at its limit starts nothing until
 * one of its own ends, so its X may wait longer than its position says), the organization level
 * of the order (projects of one organization are counted as if each were alone), and work the
 * claim resumes outside the order (waiting executions, expired leases).
 *
 * Cost, by the indexes of migration 20261126000110: one skip-scan probe per project with queued
 * work in the category (executions_queued_position_idx), for each of them at most
 * r_P + k + 1 index entries, P's line up to the newest execution asked about (once for all of
 * them), the category's running executions
 * (executions_running_category_idx, bounded by the fleet's slots) and its starts of the last 5
 * minutes (executions_category_started_idx).
 */
export async function queuePlaces(db: Knex, ids: readonly string[]): Promise<Map<string, QueuePlace>> {
  if (ids.length === 0) return new Map();
  const res = await db.raw<{ rows: { id: string; position: string; estimated_start_at: Date | null }[] }>(
    `WITH RECURSIVE me AS (
       SELECT e.id, e.project_id, e.category, e.created_at
         FROM executions e
        WHERE e.id = ANY(:ids::text[]) AND e.status = 'queued'
     ),
     categories AS (SELECT DISTINCT category FROM me),
     -- k, the executions of its own project ahead of each: one pass over each project's line up to
     -- the newest execution asked about (a list page of 20 reads the line once, not 20 times)
     ahead AS MATERIALIZED (
       SELECT r.id, r.k
         FROM (SELECT category, project_id, max(created_at) AS newest FROM me GROUP BY category, project_id) g
        CROSS JOIN LATERAL (
          SELECT a.id, row_number() OVER (ORDER BY a.created_at, a.id) - 1 AS k
            FROM executions a
           WHERE a.status = 'queued' AND a.category = g.category AND a.project_id = g.project_id AND a.created_at <= g.newest
        ) r
        WHERE r.id = ANY(:ids::text[])
     ),
     -- the projects with queued work in each category: one probe per project (a skip scan)
     queued_projects AS (
       SELECT c.category,
              (SELECT min(q.project_id) FROM executions q WHERE q.status = 'queued' AND q.category = c.category) AS project_id
         FROM categories c
       UNION ALL
       SELECT p.category,
              (SELECT min(q.project_id) FROM executions q
                WHERE q.status = 'queued' AND q.category = p.category AND q.project_id > p.project_id)
         FROM queued_projects p
        WHERE p.project_id IS NOT NULL
     ),
     running AS (
       SELECT r.category, r.project_id, count(*) AS n
         FROM executions r
        WHERE r.status = 'running' AND r.category IN (SELECT category FROM categories)
        GROUP BY r.category, r.project_id
     ),
     recent AS (
       SELECT c.category, s.started, s.first_at
         FROM categories c
        CROSS JOIN LATERAL (
          SELECT count(*) AS started, min(x.started_at) AS first_at
            FROM executions x
           WHERE x.category = c.category AND x.started_at IS NOT NULL
             AND x.started_at > tes_now() - (:windowSeconds * interval '1 second')
        ) s
     ),
     -- materialized: the position is read twice below, and must be computed once
     placed AS MATERIALIZED (
       SELECT me.id, me.category,
              1 + ahead.k + coalesce((
                SELECT sum(o.n)
                  FROM queued_projects qp
                 CROSS JOIN LATERAL (
                   SELECT coalesce((SELECT n FROM running WHERE category = me.category AND project_id = me.project_id), 0)
                          + ahead.k
                          - coalesce((SELECT n FROM running WHERE category = me.category AND project_id = qp.project_id), 0) AS caught_up
                 ) c
                 CROSS JOIN LATERAL (
                   -- Q's first caught_up + 1 queued, in its order: all but the last start before X,
                   -- the last too when it is older than X (the tie goes to the oldest head); none
                   -- when Q already runs more than P will when X starts
                   SELECT count(*) FILTER (WHERE h.j <= c.caught_up OR (h.created_at, h.id) < (me.created_at, me.id)) AS n
                     FROM (
                       SELECT b.created_at, b.id, row_number() OVER (ORDER BY b.created_at, b.id) AS j
                         FROM (
                           SELECT q.created_at, q.id FROM executions q
                            WHERE q.status = 'queued' AND q.category = me.category AND q.project_id = qp.project_id
                            ORDER BY q.created_at, q.id
                            LIMIT greatest(0, c.caught_up + 1)
                         ) b
                     ) h
                 ) o
                 WHERE qp.category = me.category AND qp.project_id IS NOT NULL AND qp.project_id <> me.project_id
              ), 0) AS position
         FROM me JOIN ahead ON ahead.id = me.id
     )
     SELECT p.id, p.position,
            CASE WHEN r.started > 0 THEN
              tes_now() + p.position * greatest(extract(epoch FROM tes_now() - r.first_at), 1) / r.started * interval '1 second'
            END AS estimated_start_at
       FROM placed p JOIN recent r ON r.category = p.category`,
    { ids: [...ids], windowSeconds: START_RATE_WINDOW_SECONDS },
  );
  return new Map(res.rows.map((r) => [r.id, { queuePosition: Number(r.position), estimatedStartAt: iso(r.estimated_start_at) }]));
}

/** The view with its place in line when it is queued (one more statement then; none otherwise). */
export async function withQueuePlace(db: Knex, view: ExecutionView): Promise<ExecutionView> {
  if (view.execution.status !== 'queued') return view;
  const place = await queuePlaces(db, [view.execution.id]);
  return { ...view, queue: place.get(view.execution.id) ?? null };
}
