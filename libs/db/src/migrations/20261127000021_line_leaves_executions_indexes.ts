import type { Knex } from 'knex';

/**
 * The partial indexes of executions that served the line (20261126000101) go: the line is read
 * from execution_line (20261127000020) now, and every submit, claim and settle no longer writes
 * them. The previous release never read them (they came after it; expand-contract.test.ts). Dropped
 * CONCURRENTLY, outside a transaction, so no submit waits; a rerun after a failure finishes it.
 */
export const config = { transaction: false };

const INDEXES: [name: string, definition: string][] = [
  ['executions_queued_fair_idx', "ON executions (category, project_id, created_at, id) WHERE status = 'queued'"],
  ['executions_running_category_idx', "ON executions (category, project_id) WHERE status = 'running'"],
];

export async function up(knex: Knex): Promise<void> {
  for (const [name] of INDEXES) await knex.raw(`DROP INDEX CONCURRENTLY IF EXISTS ${name}`);
}

export async function down(knex: Knex): Promise<void> {
  for (const [name, definition] of INDEXES) {
    await knex.raw(`DROP INDEX CONCURRENTLY IF EXISTS ${name}`);
    await knex.raw(`CREATE INDEX CONCURRENTLY ${name} ${definition}`);
  }
}
