import type { Knex } from 'knex';

/**
 * The relay shares its delivery slots by project and organization (issue #25): each claim looks
 * at every project with pending deliveries and takes, first, the oldest due delivery of the
 * project with the fewest attempts in flight (claimDueDeliveries). One project's backlog of due
 * rows must not hide another's, so the claim no longer reads due rows in one global order; it
 * walks the projects with pending deliveries (a loose index scan: one probe per project) and
 * reads each one's oldest due rows. Both need this index, by project then due time, over
 * pending rows only: its size is the deliveries not yet ended (current work), never history.
 *
 * Built CONCURRENTLY outside a transaction, as in 20261126000050: every execution that ends
 * writes deliveries. The previous release neither reads nor needs it (its claim uses
 * webhook_deliveries_due_idx, which stays).
 */
export const config = { transaction: false };

export async function up(knex: Knex): Promise<void> {
  await knex.raw(`DROP INDEX CONCURRENTLY IF EXISTS webhook_deliveries_project_due_idx`);
  await knex.raw(`CREATE INDEX CONCURRENTLY webhook_deliveries_project_due_idx ON webhook_deliveries (project_id, next_attempt_at) WHERE status = 'pending'`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`DROP INDEX CONCURRENTLY IF EXISTS webhook_deliveries_project_due_idx`);
}
