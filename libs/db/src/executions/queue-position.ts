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
 * work in the category (executions_queued_fair_idx); for each of them its first
 * max(n) + 1 queued, read once for all the executions asked about; each asking project's line up
 * to the newest execution asked about, once; a join of (execution asked about x other project)
 * rows; the category's running executions (executions_running_category_idx, bounded by the
 * fleet's slots) and its starts of the last 5 minutes (executions_category_started_idx).
 * Measured in the README ("Your place in line").
 */
export async function queuePlaces(db: Knex, ids: readonly string[]): Promise<Map<string, QueuePlace>> {
  if (ids.length === 0) return new Map();
  const res = await db.raw<{ rows: { id: string; position: string; estimated_start_at: Date | null }[] }>(
    `WITH RECURSIVE found AS MATERIALIZED (
       -- by primary key alone, then filtered: with the status beside the ids a generic plan
       -- (a named prepared statement's) may read the queued index instead of the ids' rows
       SELECT e.id, e.project_id, e.category, e.created_at, e.status
         FROM executions e
        WHERE e.id = ANY(:ids::text[])
     ),
     me AS (SELECT id, project_id, category, created_at FROM found WHERE status = 'queued'),
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
             -- a literal, not a parameter: a generic plan would guess a third of every start ever
             AND x.started_at > tes_now() - interval '${START_RATE_WINDOW_SECONDS} seconds'
        ) s
     ),
     -- each execution asked about against each other project Q with queued work in its category:
     -- n = r_P + k - r_Q, the executions Q starts before P has caught up (none when negative)
     pairs AS MATERIALIZED (
       SELECT me.id, me.category, me.created_at, qp.project_id AS other,
              coalesce(rp.n, 0) + ahead.k - coalesce(rq.n, 0) AS n
         FROM me
         JOIN ahead ON ahead.id = me.id
         JOIN queued_projects qp ON qp.category = me.category AND qp.project_id IS NOT NULL AND qp.project_id <> me.project_id
         LEFT JOIN running rp ON rp.category = me.category AND rp.project_id = me.project_id
         LEFT JOIN running rq ON rq.category = me.category AND rq.project_id = qp.project_id
     ),
     -- Q's first queued executions in its order, numbered: as many as the largest n + 1 of any pair
     -- needs (the (n+1)-th decides the tie), or all Q has when it has fewer
     heads AS MATERIALIZED (
       SELECT d.category, d.other, h.j, h.created_at, h.id
         FROM (SELECT category, other, max(n) + 1 AS wanted FROM pairs GROUP BY category, other HAVING max(n) >= 0) d
        CROSS JOIN LATERAL (
          SELECT q.created_at, q.id, row_number() OVER (ORDER BY q.created_at, q.id) AS j
            FROM (
              SELECT q.created_at, q.id FROM executions q
               WHERE q.status = 'queued' AND q.category = d.category AND q.project_id = d.other
               ORDER BY q.created_at, q.id
               LIMIT d.wanted
            ) q
        ) h
     ),
     available AS (SELECT category, other, count(*) AS n FROM heads GROUP BY category, other),
     -- what each Q starts before X: min(its queued, n), plus its (n+1)-th when that one is older
     -- than X (at n, Q and P tie on running, and the tie goes to the oldest head). Set-based
     -- (hash joins on the project and the rank), so a batch of many executions costs a join, not
     -- a subquery per execution and project.
     before AS (
       SELECT p.id,
              sum(CASE WHEN p.n < 0 THEN 0
                       ELSE least(a.n, p.n) + CASE WHEN (t.created_at, t.id) < (p.created_at, p.id) THEN 1 ELSE 0 END
                  END) AS n
         FROM pairs p
         LEFT JOIN available a ON a.category = p.category AND a.other = p.other
         LEFT JOIN heads t ON t.category = p.category AND t.other = p.other AND t.j = p.n + 1
        GROUP BY p.id
     ),
     -- materialized: the position is read twice below, and must be computed once
     placed AS MATERIALIZED (
       SELECT me.id, me.category, 1 + ahead.k + coalesce(before.n, 0) AS position
         FROM me
         JOIN ahead ON ahead.id = me.id
         LEFT JOIN before ON before.id = me.id
     )
     SELECT p.id, p.position,
            CASE WHEN r.started > 0 THEN
              tes_now() + p.position * greatest(extract(epoch FROM tes_now() - r.first_at), 1) / r.started * interval '1 second'
            END AS estimated_start_at
       FROM placed p JOIN recent r ON r.category = p.category`,
    { ids: [...ids] },
  );
  return new Map(res.rows.map((r) => [r.id, { queuePosition: Number(r.position), estimatedStartAt: iso(r.estimated_start_at) }]));
}

/** The view with its place in line when it is queued (one more statement then; none otherwise). */
export async function withQueuePlace(db: Knex, view: ExecutionView): Promise<ExecutionView> {
  if (view.execution.status !== 'queued') return view;
  const place = await queuePlaces(db, [view.execution.id]);
  return { ...view, queue: place.get(view.execution.id) ?? null };
}
