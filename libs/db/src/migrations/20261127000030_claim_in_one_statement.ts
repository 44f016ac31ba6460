import type { Knex } from 'knex';

/**
 * The fair claim (issue #25) as one statement: tes_claim_fair takes the category's claim lock,
 * picks and updates, and the lock goes with the statement's implicit commit, inside the server.
 *
 * Why: claims of a category are serialized by a transaction-scoped advisory lock. Taken in a
 * transaction of the client's (BEGIN, the lock, the pick, COMMIT), the lock was held across two
 * round trips to the worker: from the lock's answer to the pick's statement, and from the pick's
 * answer to the COMMIT. On a saturated machine those waited on the worker's event loop and the
 * scheduler, not on the database: B5 measured the lock held 15 ms a claim where the pick runs in
 * 0.5 ms, so a category claimed at most ~70 executions a second, and every claimer waited
 * 46–64 ms in line for the lock (docs/performance.md#the-claims-lock). Inside one statement the
 * lock is held for the pick and the commit, whatever the worker's process does meanwhile. The
 * worker sends it outside a transaction; inside one, the lock would last until that ends.
 *
 * The status guard is statusGuard('executions.status', ['queued']) as it read when this was
 * written; a migration is fixed once shipped, so later changes to the guard do not reach it.
 *
 * Same guarantees: the pick is the function's own statement, and a VOLATILE function's statement
 * takes a fresh snapshot (READ COMMITTED) after the lock is granted, so it sees every claim
 * committed before it, as the client's second statement did. The lock's key is the previous
 * release's ('tes_claim:' || category), so its claims and these are serialized together during
 * a rolling deploy.
 *
 * tes_category_share is the default limit of a category (the share of its live slots, at least
 * 1), the one definition the claim and the admin's `queue show` read.
 */
/** The claim as this migration made it (20261127000031 replaces its reads of projects; its down puts this back). */
export const CLAIM_FAIR_V1 = `CREATE OR REPLACE FUNCTION tes_claim_fair(p_category text, p_share float8, p_own_slots int, p_owner text, p_lease_ttl_ms int, p_live_ms int)
      RETURNS SETOF executions LANGUAGE plpgsql VOLATILE AS $$
    BEGIN
      PERFORM pg_advisory_xact_lock(hashtextextended('tes_claim:' || p_category, 0));
      RETURN QUERY
      WITH RECURSIVE share AS (
         SELECT cs.lim FROM tes_category_share(p_category, p_share, p_own_slots, p_live_ms) cs
       ), running AS (
         SELECT l.project_id, p.organization_id FROM execution_line l JOIN projects p ON p.id = l.project_id
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
       ), pick AS (
         SELECT qp.head_id AS pick_id
           FROM queued_projects qp
           JOIN projects p ON p.id = qp.project_id
           CROSS JOIN share
           LEFT JOIN by_project bp ON bp.project_id = qp.project_id
           LEFT JOIN by_org bo ON bo.organization_id = p.organization_id
           LEFT JOIN project_category_limits pl ON pl.project_id = qp.project_id AND pl.category = p_category
          WHERE coalesce(bp.n, 0) < coalesce(pl.max_running, share.lim)
            AND coalesce(bo.n, 0) < greatest(share.lim, coalesce(pl.max_running, 0))
          ORDER BY coalesce(bo.n, 0), coalesce(bp.n, 0), qp.head_created_at, qp.head_id
          LIMIT 1
       )
       UPDATE executions
          SET status = 'running', lease_owner = p_owner || ':' || (executions.claims + 1),
              lease_expires_at = tes_now() + (p_lease_ttl_ms * interval '1 millisecond'),
              started_at = coalesce(executions.started_at, tes_now()), claims = executions.claims + 1, updated_at = now()
        WHERE executions.id = (SELECT pick.pick_id FROM pick) AND executions.status = ANY((SELECT ARRAY['queued'])::text[])
        RETURNING executions.*;
    END $$;`;

export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE FUNCTION tes_category_share(p_category text, p_share float8, p_own_slots int, p_live_ms int)
      RETURNS TABLE (lim int, live int) LANGUAGE sql STABLE AS $$
      SELECT greatest(1, floor(p_share * (CASE WHEN s.live_slots > 0 THEN s.live_slots ELSE p_own_slots END)))::int, s.live_slots
        FROM (SELECT coalesce(sum(w.slots), 0)::int AS live_slots FROM worker_slots w
               WHERE w.category = p_category AND w.heartbeat_at > tes_now() - (p_live_ms * interval '1 millisecond')) s
    $$;

    ${CLAIM_FAIR_V1}
  `);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP FUNCTION tes_claim_fair(text, float8, int, text, int, int); DROP FUNCTION tes_category_share(text, float8, int, int)');
}
