import type { Knex } from 'knex';
import type { ExecutionMessage, OutboxEntry } from '@tes/core';
import { prepared } from './prepared';

/**
 * The outbox (docs/architecture.md#the-paths-that-must-never-lose-money-or-work: submit and
 * recover): the one owner of its rows. A row is written in the same statement or transaction as
 * the state change that needs a worker to look at an execution (a submit, a hand-back by the reaper); after commit the
 * writer publishes it (the gateway's dispatcher) and, if that does not happen, the relay's sweep
 * does. Both publish an OutboxEntry as it was read back from its row.
 *
 * The message itself (ExecutionMessage, OutboxEntry) is owned by libs/core (outbox-message.ts).
 * A row is routed by the execution's category: the topology binds each category's
 * work queue under its category name (libs/messaging topology.ts).
 */

/**
 * `INSERT INTO outbox` for every execution row of `source` (a CTE or table with id, project_id
 * and category), returning what toOutboxEntry reads. The one place the message is built.
 * `traceContext`: an SQL expression for the rows' traceparent (a binding), NULL without one.
 */
export function insertOutboxSql(source: string, traceContext = 'NULL'): string {
  return `INSERT INTO outbox (project_id, execution_id, routing_key, payload, trace_context)
     SELECT ${source}.project_id, ${source}.id, ${source}.category,
            jsonb_build_object('executionId', ${source}.id, 'projectId', ${source}.project_id), ${traceContext}
       FROM ${source}
     RETURNING ${OUTBOX_RETURNING}`;
}

const OUTBOX_RETURNING = 'id, routing_key, payload, trace_context';

export function toOutboxEntry(row: { id: number | string; routing_key: string; payload: ExecutionMessage; trace_context: string | null }): OutboxEntry {
  return { id: Number(row.id), routingKey: row.routing_key, message: row.payload, traceparent: row.trace_context };
}

export async function markOutboxPublished(db: Knex, ids: readonly number[]): Promise<void> {
  if (ids.length === 0) return;
  await prepared(db, 'tes_outbox_mark', 'UPDATE outbox SET published_at = now() WHERE id = ANY(:ids::bigint[]) AND published_at IS NULL', { ids: [...ids] });
}

/** What a publish of some entries came to: confirmed ids, and the others with their reason. */
export interface PublishOutcome {
  published: number[];
  failed: { id: number; error: string }[];
}

/**
 * The relay's sweep: claims unsent rows older than `graceMs` (the gateway publishes right
 * after commit; the grace keeps the relay from racing it) with FOR UPDATE SKIP LOCKED, so
 * two relays never hold the same row, hands them to `publish` while the rows stay locked,
 * and marks them sent only after `publish` resolved (broker confirms). Index: outbox_unsent_idx.
 */
export async function sweepOutbox(
  db: Knex,
  options: { graceMs: number; limit: number },
  publish: (entries: OutboxEntry[]) => Promise<PublishOutcome>,
): Promise<number> {
  return db.transaction(async (trx) => {
    const res = await trx.raw<{ rows: { id: number; routing_key: string; payload: ExecutionMessage; trace_context: string | null }[] }>(
      `SELECT ${OUTBOX_RETURNING} FROM outbox
        WHERE published_at IS NULL AND created_at < now() - (:graceMs * interval '1 millisecond')
        ORDER BY id LIMIT :limit FOR UPDATE SKIP LOCKED`,
      { graceMs: options.graceMs, limit: options.limit },
    );
    if (res.rows.length === 0) return 0;
    const { published, failed } = await publish(res.rows.map(toOutboxEntry));
    if (published.length > 0)
      await trx('outbox')
        .whereIn('id', published)
        .update({ published_at: trx.fn.now(), attempts: trx.raw('attempts + 1') });
    for (const f of failed) {
      await trx('outbox')
        .where({ id: f.id })
        .update({ attempts: trx.raw('attempts + 1'), last_error: f.error.slice(0, 500) });
    }
    return published.length;
  });
}

export async function oldestUnsentAgeSeconds(db: Knex): Promise<number> {
  const row = await db.raw<{ rows: { age: number | null }[] }>(
    `SELECT extract(epoch FROM now() - min(created_at))::float8 AS age FROM outbox WHERE published_at IS NULL`,
  );
  return row.rows[0]?.age ?? 0;
}

/** The longest a re-published execution waits before the reaper looks at it again. */
export const MAX_REDISPATCH_MS = 30 * 60_000;

/**
 * The reaper (docs/operations.md#recovery-the-database-is-the-truth): every execution open for work carries a deadline in
 * lease_expires_at by which someone must have touched it. Past it, the execution is handed
 * back and a new outbox row is written in the same transaction, so its message is published
 * by the normal path, whatever the broker lost:
 *
 * - running with an owner: the worker died or hangs. The lease is cleared (the zombie's fenced
 *   writes now fail) and the loss is counted in `attempts`; an execution that lost
 *   maxAttempts leases keeps killing or hanging its workers and is returned as exhausted
 *   instead (its row left as it is, lease expired; the caller abandons it after this commit,
 *   and if the caller dies first the next pass finds it again).
 * - running without an owner: a worker handed it back (shutdown, outage) and the message it
 *   re-sent did not bring it back in time. No attempt is spent.
 * - waiting: the provider re-check is overdue (its delayed message was lost).
 * - queued: nobody claimed it by its dispatch deadline (its message was lost, or it is still
 *   in a backlog: a duplicate message is harmless, claims are fenced).
 *
 * The next deadline is `redispatchMs` away; for queued work it grows with the execution's age
 * (at most MAX_REDISPATCH_MS), so a long backlog is not flooded with duplicates while a lost
 * message is still replaced within a bounded time. (Running and waiting work is not a backlog:
 * a second lost message is replaced as fast as the first.) FOR UPDATE SKIP LOCKED lets two relays share the
 * work. Index: executions_lease_idx.
 */
export async function reapExpiredLeases(
  db: Knex,
  options: { limit: number; maxAttempts: number; redispatchMs: number },
): Promise<{ requeued: string[]; leasesLost: string[]; exhausted: string[] }> {
  return db.transaction(async (trx) => {
    const res = await trx.raw<{ rows: { id: string; attempts: number; status: string; lease_owner: string | null }[] }>(
      `SELECT id, attempts, status, lease_owner FROM executions
        WHERE status IN ('queued', 'running', 'waiting') AND lease_expires_at < tes_now()
        ORDER BY lease_expires_at LIMIT :limit FOR UPDATE SKIP LOCKED`,
      { limit: options.limit },
    );
    const crashed = (r: { status: string; lease_owner: string | null }) => r.status === 'running' && r.lease_owner !== null;
    const exhausted = res.rows.filter((r) => crashed(r) && r.attempts + 1 >= options.maxAttempts).map((r) => r.id);
    if (exhausted.length > 0) {
      await trx('executions')
        .whereIn('id', exhausted)
        .update({ attempts: trx.raw('attempts + 1'), updated_at: trx.fn.now() });
    }
    const rows = res.rows.filter((r) => !exhausted.includes(r.id));
    if (rows.length === 0) return { requeued: [], leasesLost: [], exhausted };
    const ids = rows.map((r) => r.id);
    // The hand-back and its messages in one statement: a row handed back always has its message.
    await trx.raw(
      `WITH h AS (
         UPDATE executions
            SET lease_owner = NULL,
                attempts = attempts + (CASE WHEN status = 'running' AND lease_owner IS NOT NULL THEN 1 ELSE 0 END),
                lease_expires_at = tes_now() + CASE WHEN status = 'queued'
                  THEN LEAST(GREATEST(:redispatchMs * interval '1 millisecond', tes_now() - created_at), :maxRedispatchMs * interval '1 millisecond')
                  ELSE :redispatchMs * interval '1 millisecond' END,
                updated_at = now()
          WHERE id = ANY(:ids::text[])
          RETURNING id, project_id, category
       ) ${insertOutboxSql('h')}`,
      { redispatchMs: options.redispatchMs, maxRedispatchMs: MAX_REDISPATCH_MS, ids },
    );
    return { requeued: ids, leasesLost: rows.filter(crashed).map((r) => r.id), exhausted };
  });
}
