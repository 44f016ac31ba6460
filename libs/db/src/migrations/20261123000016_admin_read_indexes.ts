import type { Knex } from 'knex';

/**
 * Indexes for the operator's reads (issue #17), each measured with EXPLAIN ANALYZE on a database
 * of 400k executions and 2M journal entries (before -> after in docs/operations.md#the-admin-cli):
 *
 * - executions_needs_review_idx: "which executions need review?" across every project read the
 *   whole table (a parallel seq scan, 200 ms); partial, so it holds only the few executions that
 *   wait for an operator and costs the write path nothing for the others.
 * - executions_api_key_idx: a key's newest execution (`key list`) and what one key ran
 *   (`execution list --key`, the question after a key leaks) read every execution of the project
 *   for a key that never submitted (245 ms per key at 200k executions).
 * - ledger_project_time_idx: one project's journal entries of one month, in time order
 *   (`ledger export`), and its totals per account (`balance show`): the per-account index made
 *   both read the project's whole history from the heap (1 s). Account and amount ride in the
 *   index, so the opening balances and the totals are index-only scans.
 *
 * Built CONCURRENTLY, outside a transaction, so a deploy's migration Job does not block submits
 * and settlements on large tables while they build. A build that fails leaves an invalid index
 * behind; the migration is then not recorded, and its rerun drops that index and builds it again.
 */
export const config = { transaction: false };

const INDEXES: [name: string, definition: string][] = [
  ['executions_needs_review_idx', "ON executions (id DESC) WHERE status = 'needs_review'"],
  ['executions_api_key_idx', 'ON executions (api_key_id, id DESC)'],
  ['ledger_project_time_idx', 'ON ledger_entries (project_id, created_at, id) INCLUDE (account, amount_micros)'],
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
