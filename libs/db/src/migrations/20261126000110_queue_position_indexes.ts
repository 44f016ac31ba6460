import type { Knex } from 'knex';

/**
 * Indexes for a queued execution's place in line and the relay's queue gauges (issue #25,
 * libs/db/src/executions/queue-position.ts and queue-state.ts). Each read costs what is in line or
 * running now, never what the table holds:
 *
 * - executions_queued_position_idx: queued executions by category, project and age. Which
 *   projects have queued work in a category (a skip scan, one probe per project), how many of
 *   a project's executions are ahead of one (a range of the index), and the per-category
 *   count and oldest age of the gauges (index-only). Partial: a queued row leaves it when it is
 *   claimed, so it holds only the line.
 * - executions_running_category_idx: running executions by category and project (the counts the
 *   fair order levels, and the running gauge). Partial on status = 'running': bounded by the
 *   fleet's slots.
 * - executions_category_started_idx: when executions of a category started, for the recent start
 *   rate an estimated start is based on (the last 5 minutes, a range scan). started_at is set
 *   once, by the first claim, and never changes after.
 *
 * The claim's own indexes (branch fair-claim, migrations 100-109) may cover the first two under
 * other names; they are named apart so both can exist until one is dropped in a later release.
 *
 * Built CONCURRENTLY, outside a transaction, as in 20261126000050: every submit and claim writes
 * executions. A build that fails leaves an invalid index; the migration is then not recorded,
 * and its rerun drops that index and builds it again. The previous release neither reads nor
 * needs these indexes.
 */
export const config = { transaction: false };

const INDEXES: [name: string, definition: string][] = [
  ['executions_queued_position_idx', "ON executions (category, project_id, created_at, id) WHERE status = 'queued'"],
  ['executions_running_category_idx', "ON executions (category, project_id) WHERE status = 'running'"],
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
