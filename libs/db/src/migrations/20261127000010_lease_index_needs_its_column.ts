import type { Knex } from 'knex';

/**
 * executions_lease_idx serves the reaper only (reapExpiredLeases: `lease_expires_at < tes_now()`),
 * and now says so in its predicate: `lease_expires_at IS NOT NULL`, which every open row satisfies
 * (20261126000020 fills it), so the index holds exactly the rows it held.
 *
 * Why (issue #24, measured at 10 M executions): the index covered every open state, so any
 * statement filtering on `status = 'queued'` (a queued execution's place in line, the line's
 * counts, the fair claim) could be served by it, and at that size the planner cannot tell the
 * live rows apart: ANALYZE samples 30,000 rows of 10 million, so a line of 400 is not in its
 * statistics and both partial indexes read as empty. It then weighed the two by their sizes, and
 * executions_queued_fair_idx (a B-tree by project that every execution enters and leaves) had
 * grown five times larger: each poll of a queued execution walked the whole live set of every
 * project through this index and sorted it (500 buffers a poll against 6; B1 0.72×). A statement
 * must now bound lease_expires_at to reach this index, which only the reaper does.
 *
 * Built CONCURRENTLY beside the old one and swapped by name in one short transaction, so the
 * reaper always finds an index of this name (live-statistics.ts reads its reltuples by name);
 * a rerun after a failure starts from whatever was left. The previous release's reaper bounds
 * lease_expires_at too, so it uses the new index; nothing of it relied on the old predicate.
 */
export const config = { transaction: false };

const OPEN = `status IN ('queued', 'running', 'waiting')`;

export async function up(knex: Knex): Promise<void> {
  await knex.raw('DROP INDEX CONCURRENTLY IF EXISTS executions_lease_idx_old');
  await knex.raw('DROP INDEX CONCURRENTLY IF EXISTS executions_lease_idx_new');
  await knex.raw(`CREATE INDEX CONCURRENTLY executions_lease_idx_new ON executions (lease_expires_at) WHERE ${OPEN} AND lease_expires_at IS NOT NULL`);
  await swap(knex);
}

/** The new index takes the name in one transaction (the reaper always finds one), then the old one goes. */
async function swap(knex: Knex): Promise<void> {
  await knex.transaction(async (trx) => {
    await trx.raw('ALTER INDEX IF EXISTS executions_lease_idx RENAME TO executions_lease_idx_old');
    await trx.raw('ALTER INDEX executions_lease_idx_new RENAME TO executions_lease_idx');
  });
  await knex.raw('DROP INDEX CONCURRENTLY IF EXISTS executions_lease_idx_old');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP INDEX CONCURRENTLY IF EXISTS executions_lease_idx_old');
  await knex.raw('DROP INDEX CONCURRENTLY IF EXISTS executions_lease_idx_new');
  await knex.raw(`CREATE INDEX CONCURRENTLY executions_lease_idx_new ON executions (lease_expires_at) WHERE ${OPEN}`);
  await swap(knex);
}
