import type { Knex } from 'knex';

/**
 * Indexes for the relay's retention (issue #24, libs/db/src/retention.ts): each batch reads only
 * rows past their horizon, oldest first, so a batch costs what it deletes and never what the
 * table holds.
 *
 * - outbox_published_idx: published rows by publish time. Partial: unsent rows (the only ones
 *   anybody still reads) are not in it, so retention cannot reach them. Marking a row published
 *   was already not a HOT update (published_at is in outbox_unsent_idx's predicate); it now
 *   writes one more index entry.
 * - webhook_deliveries_finished_idx: ended deliveries (delivered or failed) by the time their
 *   event was written. Partial: a pending delivery is never a candidate.
 * - usage_counters_month_idx: the counters by month (the primary key leads with the project, so
 *   "every project's months before X" would read the whole table).
 *
 * rate_limits is already indexed on its window's end (rate_limits_expire_idx).
 *
 * Built CONCURRENTLY, outside a transaction, as in 20261123000016: the outbox and the deliveries
 * are written by every submit and settle, and a plain CREATE INDEX would block those writes for
 * the whole build on a large table. A build that fails leaves an invalid index; the migration is
 * then not recorded, and its rerun drops that index and builds it again. The previous release
 * neither reads nor needs these indexes: its writes go on unchanged.
 */
export const config = { transaction: false };

const INDEXES: [name: string, definition: string][] = [
  ['outbox_published_idx', 'ON outbox (published_at) WHERE published_at IS NOT NULL'],
  ['webhook_deliveries_finished_idx', "ON webhook_deliveries (created_at) WHERE status IN ('delivered', 'failed')"],
  ['usage_counters_month_idx', 'ON usage_counters (month)'],
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
