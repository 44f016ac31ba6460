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

/**
 * Lease reaper: executions whose worker lease expired (a dead or stuck worker) are handed
 * back: the lease is cleared (the zombie's fenced writes now fail) and a new outbox row is
 * written in the same transaction, so the message is published by the normal path.
 * FOR UPDATE SKIP LOCKED lets two relays share the work. Index: executions_lease_idx.
 */
export async function reapExpiredLeases(
  db: Knex,
  options: { limit: number; routingKeyFor: (category: string) => string; maxAttempts: number },
): Promise<{ requeued: string[]; exhausted: string[] }> {
  return db.transaction(async (trx) => {
    const res = await trx.raw<{ rows: { id: string; project_id: string; category: string; attempts: number; status: string }[] }>(
      `SELECT id, project_id, category, attempts, status FROM executions
        WHERE status IN ('running', 'waiting') AND lease_expires_at < now()
        ORDER BY lease_expires_at LIMIT ? FOR UPDATE SKIP LOCKED`,
      [options.limit],
    );
    // An execution claimed maxAttempts times without ending keeps killing or hanging its
    // workers: it is not handed out again. Its row is left as it is (lease expired) and the
    // caller abandons it after this commit; if the caller dies first, the next pass finds
    // it again.
    const exhausted = res.rows.filter((r) => r.status === 'running' && r.attempts >= options.maxAttempts).map((r) => r.id);
    const rows = res.rows.filter((r) => !exhausted.includes(r.id));
    if (rows.length === 0) return { requeued: [], exhausted };
    const ids = rows.map((r) => r.id);
    // The lease owner is cleared (a zombie worker's fenced writes now fail; anyone may claim)
    // and the deadline pushed out: if the new message is lost too, the execution is reaped
    // again then, instead of never (a NULL deadline would never be "past").
    await trx('executions')
      .whereIn('id', ids)
      .update({ lease_owner: null, lease_expires_at: trx.raw(`now() + interval '5 minutes'`), updated_at: trx.fn.now() });
    await trx('outbox').insert(
      rows.map((r) => ({
        project_id: r.project_id,
        execution_id: r.id,
        routing_key: options.routingKeyFor(r.category),
        payload: JSON.stringify({ executionId: r.id, projectId: r.project_id }),
      })),
    );
    return { requeued: ids, exhausted };
  });
}
