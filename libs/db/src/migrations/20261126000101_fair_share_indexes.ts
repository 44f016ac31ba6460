import type { Knex } from 'knex';

/**
 * The indexes of the fair-share claim (libs/db/src/executions/fair-share.ts), so a claim costs
 * what is queued and running in its category, never the history:
 *
 * - executions_queued_fair_idx: queued work by category, project, then first-in first-out. The
 *   pick walks it once per project with queued work (a skip scan: one probe per project) and
 *   takes each project's head from it.
 * - executions_running_category_idx: running work by category and project, for the running
 *   counts of the projects and organizations (bounded by the slots, plus leases not yet reaped).
 *
 * Partial on status: an execution leaves both when it moves on, so they hold only open work.
 * Built CONCURRENTLY outside a transaction, as in 20261126000050 (executions is written by every
 * submit, claim and settle). The previous release does not read them.
 */
export const config = { transaction: false };

const INDEXES: [name: string, definition: string][] = [
  ['executions_queued_fair_idx', "ON executions (category, project_id, created_at, id) WHERE status = 'queued'"],
  ['executions_running_category_idx', "ON executions (category, project_id) WHERE status = 'running'"],
];

export async function up(knex: Knex): Promise<void> {
  for (const [name, definition] of INDEXES) {
    await knex.raw(`DROP INDEX CONCURRENTLY IF EXISTS ${name}`);
    await knex.raw(`CREATE INDEX CONCURRENTLY ${name} ${definition}`);
  }
}

export async function down(knex: Knex): Promise<void> {
  for (const [name] of INDEXES) await knex.raw(`DROP INDEX CONCURRENTLY IF EXISTS ${name}`);
}
