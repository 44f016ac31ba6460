import type { Knex } from 'knex';
import { prepared } from './prepared';

export interface OutboxRow {
  id: number;
  projectId: string;
  executionId: string;
  routingKey: string;
  payload: Record<string, unknown>;
}

export async function markOutboxPublished(db: Knex, ids: number[]): Promise<void> {
  if (ids.length === 0) return;
  await prepared(db, 'tes_outbox_mark', 'UPDATE outbox SET published_at = now() WHERE id = ANY(?::bigint[]) AND published_at IS NULL', [ids]);
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
  publish: (rows: OutboxRow[]) => Promise<{ published: number[]; failed: { id: number; error: string }[] }>,
): Promise<number> {
  return db.transaction(async (trx) => {
    const res = await trx.raw<{ rows: { id: number; project_id: string; execution_id: string; routing_key: string; payload: Record<string, unknown> }[] }>(
      `SELECT id, project_id, execution_id, routing_key, payload FROM outbox
        WHERE published_at IS NULL AND created_at < now() - (? * interval '1 millisecond')
        ORDER BY id LIMIT ? FOR UPDATE SKIP LOCKED`,
      [options.graceMs, options.limit],
    );
    if (res.rows.length === 0) return 0;
    const { published, failed } = await publish(
      res.rows.map((r) => ({ id: r.id, projectId: r.project_id, executionId: r.execution_id, routingKey: r.routing_key, payload: r.payload })),
    );
    if (published.length > 0) await trx('outbox').whereIn('id', published).update({ published_at: trx.fn.now(), attempts: trx.raw('attempts + 1') });
    for (const f of failed) {
      await trx('outbox').where({ id: f.id }).update({ attempts: trx.raw('attempts + 1'), last_error: f.error.slice(0, 500) });
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
 * The reaper (architecture.md, path 4): every execution open for work carries a deadline in
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
  options: { limit: number; routingKeyFor: (category: string) => string; maxAttempts: number; redispatchMs: number },
): Promise<{ requeued: string[]; leasesLost: string[]; exhausted: string[] }> {
  return db.transaction(async (trx) => {
    const res = await trx.raw<{ rows: { id: string; project_id: string; category: string; attempts: number; status: string; lease_owner: string | null }[] }>(
      `SELECT id, project_id, category, attempts, status, lease_owner FROM executions
        WHERE status IN ('queued', 'running', 'waiting') AND lease_expires_at < tes_now()
        ORDER BY lease_expires_at LIMIT ? FOR UPDATE SKIP LOCKED`,
      [options.limit],
    );
    const crashed = (r: { status: string; lease_owner: string | null }) => r.status === 'running' && r.lease_owner !== null;
    const exhausted = res.rows.filter((r) => crashed(r) && r.attempts + 1 >= options.maxAttempts).map((r) => r.id);
    if (exhausted.length > 0) {
      await trx('executions').whereIn('id', exhausted).update({ attempts: trx.raw('attempts + 1'), updated_at: trx.fn.now() });
    }
    const rows = res.rows.filter((r) => !exhausted.includes(r.id));
    if (rows.length === 0) return { requeued: [], leasesLost: [], exhausted };
    const ids = rows.map((r) => r.id);
    await trx.raw(
      `UPDATE executions
          SET lease_owner = NULL,
              attempts = attempts + (CASE WHEN status = 'running' AND lease_owner IS NOT NULL THEN 1 ELSE 0 END),
              lease_expires_at = tes_now() + CASE WHEN status = 'queued'
                THEN LEAST(GREATEST(? * interval '1 millisecond', tes_now() - created_at), ? * interval '1 millisecond')
                ELSE ? * interval '1 millisecond' END,
              updated_at = now()
        WHERE id = ANY(?::text[])`,
      [options.redispatchMs, MAX_REDISPATCH_MS, options.redispatchMs, ids] as unknown as Knex.RawBinding[],
    );
    await trx('outbox').insert(rows.map((r) => outboxEntry(r.project_id, r.id, options.routingKeyFor(r.category))));
    return { requeued: ids, leasesLost: rows.filter(crashed).map((r) => r.id), exhausted };
  });
}

/** The message that tells a worker "go look at execution X" (the broker carries nothing else). */
export function outboxEntry(projectId: string, executionId: string, routingKey: string): { project_id: string; execution_id: string; routing_key: string; payload: string } {
  return { project_id: projectId, execution_id: executionId, routing_key: routingKey, payload: JSON.stringify({ executionId, projectId }) };
}
