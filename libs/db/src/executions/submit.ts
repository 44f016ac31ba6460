/** The submit (architecture.md, path 1): reservation, execution, its files, outbox row and journal in one statement. */
import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import { AppError } from '@tes/core';
import { prepared } from '../prepared';
import { isUniqueViolation } from '../pg-errors';
import { EXECUTION_SELECT, findByIdempotencyKey, toExecution, type ExecutionRecord } from './records';

export interface SubmitInput {
  id: string;
  projectId: string;
  apiKeyId: string;
  tool: string;
  model: string;
  category: string;
  arguments: Record<string, unknown>;
  priceVersion: string;
  totalSteps: number;
  reservedMicros: number;
  idempotencyKey: string;
  requestDigest: string;
  routingKey: string;
  /** The uploads the arguments name: each must still be live when the submit commits. */
  fileIds?: readonly string[];
  /** A queued execution nobody claimed by then is published again by the relay. */
  dispatchDeadlineMs: number;
}

export type SubmitResult =
  | { kind: 'created'; execution: ExecutionRecord; outboxId: number }
  | { kind: 'existing'; execution: ExecutionRecord };

/**
 * The submit (architecture.md, path 1) as ONE statement, so one round trip and one commit:
 * the conditional reservation on the project's balance row, the execution (its idempotency
 * binding), its outbox row and the reservation's journal entries.
 *
 * Every part depends on the reservation: if the balance or the monthly cap refuses it,
 * nothing is written and no row comes back. A second submit with the same idempotency key
 * cannot slip through either: its execution insert violates the unique (project_id,
 * idempotency_key) index and the whole statement, reservation included, is undone; a
 * concurrent duplicate waits on the balance row until the first commits and then fails on
 * the index the same way. Either outcome is then answered from the existing binding. The
 * balance row is locked by the statement's first part and held only to its commit (no
 * client round trip while it is held).
 *
 * The uploads the arguments name are locked FOR SHARE and must be live: the janitor, which
 * locks an expired file FOR UPDATE before deleting it, either waits for this commit (and then
 * sees the execution_files rows, so keeps the file until the execution ends) or has deleted it
 * already (then the file no longer qualifies and nothing is written). The month of the cap
 * comes from the database's clock (tes_month()), never from a process's.
 */
const SUBMIT_SQL = `WITH f AS (
     SELECT id FROM files
      WHERE project_id = ? AND id = ANY(?::text[]) AND deleted_at IS NULL AND expires_at > tes_now()
        FOR SHARE
   ), p AS (
     UPDATE projects
        SET available_micros = available_micros - ?::bigint,
            reserved_micros = reserved_micros + ?::bigint
      WHERE id = ?
        AND available_micros >= ?::bigint
        AND (monthly_cap_micros IS NULL
             OR (CASE WHEN cap_month >= tes_month() THEN month_charged_micros ELSE 0 END)
                + reserved_micros + ?::bigint <= monthly_cap_micros)
        AND (SELECT count(*) FROM f) = cardinality(?::text[])
        AND tes_submit_guard(?, ?)
      RETURNING id
   ), e AS (
     INSERT INTO executions (id, project_id, api_key_id, tool, model, category, status, arguments, price_version,
       total_steps, reserved_micros, idempotency_key, request_digest, lease_expires_at, created_at)
     SELECT ?::text, p.id, ?::text, ?::text, ?::text, ?::text, 'queued', ?::jsonb, ?::text, ?::int, ?::bigint, ?::text, ?::text,
            tes_now() + (?::int * interval '1 millisecond'), tes_now() FROM p
     RETURNING ${EXECUTION_SELECT}
   ), ef AS (
     INSERT INTO execution_files (execution_id, file_id, project_id)
     SELECT e.id, f.id, e.project_id FROM e CROSS JOIN f
     RETURNING 1
   ), o AS (
     INSERT INTO outbox (project_id, execution_id, routing_key, payload)
     SELECT e.project_id, e.id, ?::text, ?::jsonb FROM e
     RETURNING id
   ), l AS (
     INSERT INTO ledger_entries (transaction_id, project_id, execution_id, kind, account, amount_micros)
     SELECT ?::text, e.project_id, e.id, 'reserve', v.account, v.amount
       FROM e CROSS JOIN (VALUES ('available', -?::bigint), ('reserved', ?::bigint)) AS v(account, amount)
     RETURNING 1
   )
   SELECT e.*, (SELECT id FROM o) AS outbox_id FROM e`;

/** The unique index that is the idempotency binding. */
const IDEMPOTENCY_CONSTRAINT = 'executions_project_id_idempotency_key_key';

export async function submitExecution(db: Knex, input: SubmitInput, hooks: { beforeWrite?: () => void } = {}, attempt = 0): Promise<SubmitResult> {
  if (!Number.isSafeInteger(input.reservedMicros) || input.reservedMicros < 0) throw new Error('reservation must be a whole number of micros');
  const r = input.reservedMicros;
  const fileIds = [...new Set(input.fileIds ?? [])];
  hooks.beforeWrite?.();
  let rows: (Record<string, unknown> & { outbox_id: number })[];
  try {
    ({ rows } = await prepared<{ rows: (Record<string, unknown> & { outbox_id: number })[] }>(db, 'tes_submit', SUBMIT_SQL, [
      input.projectId,
      fileIds,
      r,
      r,
      input.projectId,
      r,
      r,
      fileIds,
      bindingLockKey(input.projectId, input.idempotencyKey),
      input.priceVersion,
      input.id,
      input.apiKeyId,
      input.tool,
      input.model,
      input.category,
      JSON.stringify(input.arguments),
      input.priceVersion,
      input.totalSteps,
      r,
      input.idempotencyKey,
      input.requestDigest,
      input.dispatchDeadlineMs,
      input.routingKey,
      JSON.stringify({ executionId: input.id, projectId: input.projectId }),
      randomUUID(),
      r,
      r,
    ]));
  } catch (err) {
    // the key is bound already (perhaps by a concurrent twin): nothing of this one was written
    if (!(isUniqueViolation(err) && (err as { constraint?: unknown }).constraint === IDEMPOTENCY_CONSTRAINT)) throw err;
    rows = [];
  }
  const row = rows[0];
  if (row) return { kind: 'created', execution: toExecution(row), outboxId: row.outbox_id };

  // Nothing was written: the key is bound (a resend is answered with its execution whatever
  // the balance is now), an upload expired or was deleted since the gateway checked it, or the
  // balance or the monthly cap refused the reservation.
  const existing = await findBindingSettled(db, input.projectId, input.idempotencyKey);
  if (existing) return { kind: 'existing', execution: existing };
  if (fileIds.length > 0) {
    const live = await db.raw<{ rows: { id: string }[] }>(
      `SELECT id FROM files WHERE project_id = ? AND id = ANY(?::text[]) AND deleted_at IS NULL AND expires_at > tes_now()`,
      [input.projectId, fileIds] as unknown as Knex.RawBinding[],
    );
    const gone = fileIds.find((id) => !live.rows.some((row) => row.id === id));
    if (gone) throw new AppError('file_not_found', 'file_not_found', { details: { fileId: gone } });
  }
  const current = await db('price_versions').select('version').orderBy('seq', 'desc').first();
  if (current?.version !== input.priceVersion) {
    throw new AppError('price_version_mismatch', 'price_version_mismatch', { details: { currentPriceVersion: current?.version ?? null } });
  }
  // Balance and cap from one read, judged as the statement judged them. This read is later
  // than the statement: if neither refuses now (money was released meanwhile), the submit is
  // tried again rather than answered with a reason that no longer holds.
  const p = (
    await db.raw<{ rows: { available_micros: number; reserved_micros: number; monthly_cap_micros: number | null; month_charged: number }[] }>(
      `SELECT available_micros, reserved_micros, monthly_cap_micros,
              CASE WHEN cap_month >= tes_month() THEN month_charged_micros ELSE 0 END AS month_charged
         FROM projects WHERE id = ?`,
      [input.projectId],
    )
  ).rows[0];
  if (!p || p.available_micros < r) {
    throw new AppError('insufficient_balance', 'insufficient_balance', {
      details: { requiredMicros: r, availableMicros: p?.available_micros ?? 0, retryable: false },
    });
  }
  if (p.monthly_cap_micros !== null && Number(p.month_charged) + p.reserved_micros + r > p.monthly_cap_micros) {
    throw new AppError('monthly_cap_exceeded', 'monthly_cap_exceeded', { details: { requiredMicros: r, retryable: false } });
  }
  if (attempt < 2) return submitExecution(db, input, hooks, attempt + 1);
  throw new AppError('service_unavailable', 'service_unavailable', { retryable: true, details: { reason: 'the balance changed while the submit was judged; retry' } });
}

const bindingLockKey = (projectId: string, key: string) => `tes.binding:${projectId}:${key}`;

/**
 * The execution bound to a key, read after any submit with that key that is still in flight has
 * committed or rolled back (it holds the binding's advisory lock from its guard to its commit;
 * see migration 20261123000011). For refusals: a resend is never told "rejected" while its
 * original may still commit.
 */
export async function findBindingSettled(db: Knex, projectId: string, key: string): Promise<ExecutionRecord | null> {
  return db.transaction(async (trx) => {
    await trx.raw('SELECT pg_advisory_xact_lock(hashtextextended(?, 0))', [bindingLockKey(projectId, key)]);
    return findByIdempotencyKey(trx, projectId, key);
  });
}
