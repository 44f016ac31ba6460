import type { Knex } from 'knex';

/**
 * Indexes for a queued execution's place in line and the relay's queue gauges (issue #25,
 * libs/db/src/executions/queue-position.ts and queue-state.ts). Each read costs what is in line or
 * running now, never what the table holds:
 *
 * - executions_category_started_idx: when executions of a category started, for the recent start
 *   rate an estimated start is based on (the last 5 minutes, a range scan). started_at is set
 *   once, by the first claim, and never changes after.
 *
 * The place in line and the gauges also read the claim's indexes (20261126000101):
 * executions_queued_fair_idx (queued executions by category, project and age: which projects
 * have queued work in a category, a skip scan with one probe per project; how many of a
 * project's executions are ahead of one, a range; the per-category count and oldest age,
 * index-only) and executions_running_category_idx (the running counts the fair order levels).
 *
 * Built CONCURRENTLY, outside a transaction, as in 20261126000050: every submit and claim writes
 * executions. A build that fails leaves an invalid index; the migration is then not recorded,
 * and its rerun drops that index and builds it again. The previous release neither reads nor
 * needs these indexes.
 */
export const config = { transaction: false };

const INDEXES: [name: string, definition: string][] = [
  ['executions_category_started_idx', 'ON executions (category, started_at) WHERE started_at IS NOT NULL'],
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
