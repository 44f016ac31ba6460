/**
 * Retention of the operational tables (issue #24): rows that only ever grew, deleted in small
 * batches once past a stated horizon. Money history (ledger_entries, executions and what
 * describes an execution: its steps, artifacts and input files) is never deleted here; its
 * storage plan is docs/storage.md.
 *
 * One batch is one statement, so its own short transaction: it claims at most `limit` rows past
 * the horizon, oldest first, with FOR UPDATE SKIP LOCKED, and deletes exactly those.
 *
 * - It never waits for a writer: a row some transaction holds is skipped (a later pass takes it).
 * - A writer never waits for it, except on a row the batch is deleting, and then for one
 *   statement at most. No writer touches those rows: published outbox rows and ended deliveries
 *   are never written again (rows are written only while unsent or pending: the sweep holds
 *   unsent rows, the other writes are fenced on `published_at IS NULL` or `status = 'pending'`),
 *   a past usage month is never counted into (the month comes from tes_month()). Only a
 *   rate-limit window that ended over the horizon ago can be upserted by a gateway while its row
 *   is being deleted; that upsert waits for the batch's commit, then inserts a fresh window,
 *   which is what it would have written anyway.
 * - FOR UPDATE re-checks the horizon on a row a writer changed after the batch's snapshot (a
 *   window a gateway restarted), so such a row is not deleted.
 * - Each claim reads an index in the order it deletes (named per table below), so a batch costs
 *   what it deletes, not what the table holds.
 *
 * The horizons are read from the database's clock (tes_now()), the one clock of every deadline.
 */
import type { Knex } from 'knex';

/** The tables retention prunes, in the order a pass visits them. */
export const RETAINED_TABLES = ['outbox', 'webhook_deliveries', 'rate_limits', 'usage_counters'] as const;
export type RetainedTable = (typeof RETAINED_TABLES)[number];

/** How long each table keeps a row once it is done with (config: libs/config `retention`). */
export interface RetentionHorizons {
  /** A published outbox row, after its publication (nothing reads it again). */
  outboxMs: number;
  /** A delivered or failed webhook delivery, after its event was written (`webhook deliveries` shows it until then). */
  webhookDeliveriesMs: number;
  /** A rate-limit window, after its end (an ended window is restarted by the next request anyway). */
  rateLimitsMs: number;
  /** Usage months kept, the current one included (GET /tools/usage reads the current month only). At least 2. */
  usageMonths: number;
}

/**
 * One batch per table: `:limit` rows past the horizon, claimed in index order and deleted in the
 * same statement. Each claim repeats its index's predicate so the planner can use the partial
 * index (migration 20261126000050). The claimed rows are deleted by their ctid (a TID scan:
 * a join back on the key let the planner hash-join a sequential scan of the whole table). A
 * claimed row's ctid is stable until the statement ends: the claim locked the row's newest
 * version, so nobody can update or move it.
 */
const BATCHES: Record<RetainedTable, { sql: string; horizon: (h: RetentionHorizons) => number }> = {
  // Index: outbox_published_idx (published_at) WHERE published_at IS NOT NULL. Unsent rows are
  // not in it: retention cannot reach a row the relay has yet to publish.
  outbox: {
    sql: `DELETE FROM outbox WHERE ctid = ANY(ARRAY(
            SELECT ctid FROM outbox
             WHERE published_at IS NOT NULL AND published_at < tes_now() - :horizon * interval '1 millisecond'
             ORDER BY published_at LIMIT :limit FOR UPDATE SKIP LOCKED))`,
    horizon: (h) => h.outboxMs,
  },
  // Index: webhook_deliveries_finished_idx (created_at) WHERE status IN ('delivered', 'failed').
  // A pending delivery (being retried, or claimed by a deliverer) is never a candidate.
  webhook_deliveries: {
    sql: `DELETE FROM webhook_deliveries WHERE ctid = ANY(ARRAY(
            SELECT ctid FROM webhook_deliveries
             WHERE status IN ('delivered', 'failed') AND created_at < tes_now() - :horizon * interval '1 millisecond'
             ORDER BY created_at LIMIT :limit FOR UPDATE SKIP LOCKED))`,
    horizon: (h) => h.webhookDeliveriesMs,
  },
  // Index: rate_limits_expire_idx (expire). `expire` is the window's end in epoch ms.
  rate_limits: {
    sql: `DELETE FROM rate_limits WHERE ctid = ANY(ARRAY(
            SELECT ctid FROM rate_limits
             WHERE expire < (extract(epoch FROM tes_now()) * 1000)::bigint - :horizon
             ORDER BY expire LIMIT :limit FOR UPDATE SKIP LOCKED))`,
    horizon: (h) => h.rateLimitsMs,
  },
  // Index: usage_counters_month_idx (month). Keeps the current month and the `usageMonths - 1` before it.
  usage_counters: {
    sql: `DELETE FROM usage_counters WHERE ctid = ANY(ARRAY(
            SELECT ctid FROM usage_counters
             WHERE month < (tes_month() - make_interval(months => :horizon - 1))::date
             ORDER BY month LIMIT :limit FOR UPDATE SKIP LOCKED))`,
    horizon: (h) => h.usageMonths,
  },
};

/** The statement of one table's batch (for EXPLAIN in tests and by operators). */
export function retentionBatchSql(table: RetainedTable): string {
  return BATCHES[table].sql;
}

/**
 * Deletes one batch of `table`'s rows past their horizon; returns how many. Runs in `db`'s
 * transaction when given one (a test holds it open to show what a batch's locks block),
 * else as a statement of its own.
 */
export async function deleteRetentionBatch(db: Knex | Knex.Transaction, table: RetainedTable, horizons: RetentionHorizons, limit: number): Promise<number> {
  if (table === 'usage_counters' && horizons.usageMonths < 2) throw new Error('usageMonths must keep the current and the previous month');
  const batch = BATCHES[table];
  const res = await db.raw<{ rowCount: number | null }>(batch.sql, { horizon: batch.horizon(horizons), limit });
  return res.rowCount ?? 0;
}
