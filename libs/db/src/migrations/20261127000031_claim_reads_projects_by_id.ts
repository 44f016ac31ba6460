import type { Knex } from 'knex';
import { CLAIM_FAIR_V1 } from './20261127000030_claim_in_one_statement';

/**
 * The fair claim reads projects by id, one probe per row it needs (issue #24). tes_claim_fair
 * (20261127000030) joined its running executions to projects, and the planner, which estimates
 * the running line from execution_line's statistics (a thousand rows where a handful run), hashed
 * the whole projects table for every claim: 205 pages at 13,500 projects (10 M executions of
 * history), 286 buffers a claim against 53 on an empty database, and B5 0.71× there, for claims
 * are serialized and the pick's time is the category's claim rate. The organization of a running
 * execution and of a queued project's head is now a scalar subquery by primary key, which
 * PostgreSQL runs per row and never turns into a scan: a claim reads projects once per running
 * execution and per project with queued work, however many projects exist.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE OR REPLACE FUNCTION tes_claim_fair(p_category text, p_share float8, p_own_slots int, p_owner text, p_lease_ttl_ms int, p_live_ms int)
      RETURNS SETOF executions LANGUAGE plpgsql VOLATILE AS $$
    BEGIN
      PERFORM pg_advisory_xact_lock(hashtextextended('tes_claim:' || p_category, 0));
      RETURN QUERY
      WITH RECURSIVE share AS (
         SELECT cs.lim FROM tes_category_share(p_category, p_share, p_own_slots, p_live_ms) cs
       ), running AS (
         SELECT l.project_id, (SELECT p.organization_id FROM projects p WHERE p.id = l.project_id) AS organization_id
           FROM execution_line l
          WHERE l.status = 'running' AND l.category = p_category
       ), by_project AS (
         SELECT r.project_id, count(*)::int AS n FROM running r GROUP BY r.project_id
       ), by_org AS (
         SELECT r.organization_id, count(*)::int AS n FROM running r GROUP BY r.organization_id
       ), queued_projects AS (
         (SELECT l.project_id, l.created_at AS head_created_at, l.execution_id AS head_id FROM execution_line l
           WHERE l.status = 'queued' AND l.category = p_category ORDER BY l.project_id, l.created_at, l.execution_id LIMIT 1)
         UNION ALL
         SELECT n.project_id, n.created_at, n.execution_id
           FROM queued_projects q
           CROSS JOIN LATERAL (
             SELECT l.project_id, l.created_at, l.execution_id FROM execution_line l
              WHERE l.status = 'queued' AND l.category = p_category AND l.project_id > q.project_id
              ORDER BY l.project_id, l.created_at, l.execution_id LIMIT 1
           ) n
       ), heads AS (
         SELECT qp.project_id, qp.head_created_at, qp.head_id,
                (SELECT p.organization_id FROM projects p WHERE p.id = qp.project_id) AS organization_id
           FROM queued_projects qp
       ), pick AS (
         SELECT h.head_id AS pick_id
           FROM heads h
           CROSS JOIN share
           LEFT JOIN by_project bp ON bp.project_id = h.project_id
           LEFT JOIN by_org bo ON bo.organization_id = h.organization_id
           LEFT JOIN project_category_limits pl ON pl.project_id = h.project_id AND pl.category = p_category
          WHERE coalesce(bp.n, 0) < coalesce(pl.max_running, share.lim)
            AND coalesce(bo.n, 0) < greatest(share.lim, coalesce(pl.max_running, 0))
          ORDER BY coalesce(bo.n, 0), coalesce(bp.n, 0), h.head_created_at, h.head_id
          LIMIT 1
       )
       UPDATE executions
          SET status = 'running', lease_owner = p_owner || ':' || (executions.claims + 1),
              lease_expires_at = tes_now() + (p_lease_ttl_ms * interval '1 millisecond'),
              started_at = coalesce(executions.started_at, tes_now()), claims = executions.claims + 1, updated_at = now()
        WHERE executions.id = (SELECT pick.pick_id FROM pick) AND executions.status = ANY((SELECT ARRAY['queued'])::text[])
        RETURNING executions.*;
    END $$;
  `);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(CLAIM_FAIR_V1);
}
