/** The submit (docs/architecture.md#the-paths-that-must-never-lose-money-or-work): reservation, execution, its files, outbox row and journal in one statement. */
import type { Knex } from 'knex';
import { AppError, newId, type ExecutionMessage, type OutboxEntry } from '@tes/core';
import { prepared } from '../prepared';
import { isUniqueViolation } from '../pg-errors';
import { notDeleted } from '../files';
import { insertOutboxSql, toOutboxEntry } from '../outbox';
import { EXECUTION_SELECT, findByIdempotencyKey, toExecution, type ExecutionRecord, type ExecutionRow } from './records';

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
  /** The uploads the arguments name: each must still be live when the submit commits. */
  fileIds?: readonly string[];
  /** A queued execution nobody claimed by then is published again by the relay. */
  dispatchDeadlineMs: number;
  /** The submit's W3C traceparent (tracing on), kept in the outbox row for whoever publishes it. */
  traceparent?: string | null;
}

export type SubmitResult =
  /** `outbox`: the message this submit wrote, for the caller to dispatch after commit. */
  { kind: 'created'; execution: ExecutionRecord; outbox: OutboxEntry } | { kind: 'existing'; execution: ExecutionRecord };

/**
 * The submit (docs/architecture.md#the-paths-that-must-never-lose-money-or-work) as ONE statement, so one round trip and one commit:
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
      WHERE project_id = :projectId AND id = ANY(:fileIds::text[]) AND ${notDeleted()} AND expires_at > tes_now()
        FOR SHARE
   ), p AS (
     UPDATE projects
        SET available_micros = available_micros - :reserved::bigint,
            reserved_micros = reserved_micros + :reserved::bigint
      WHERE id = :projectId
        AND available_micros >= :reserved::bigint
        AND (monthly_cap_micros IS NULL
             OR (CASE WHEN cap_month >= tes_month() THEN month_charged_micros ELSE 0 END)
                + reserved_micros + :reserved::bigint <= monthly_cap_micros)
        AND (SELECT count(*) FROM f) = cardinality(:fileIds::text[])
        -- A bound key takes no lock on the balance row: its insert would wait on the bound
        -- execution's row, which a settlement holding that row then wants the balance row for
        -- (a deadlock). This NOT EXISTS reads the statement's snapshot, so it waits for nobody,
        -- but misses an original that committed after this statement began (a resend sent
        -- while its original was in flight): the guard reads the binding again under the key's
        -- lock, with a fresh snapshot, and refuses then (migration 20261126000030).
        AND NOT EXISTS (SELECT 1 FROM executions b WHERE b.project_id = :projectId AND b.idempotency_key = :idempotencyKey)
        AND tes_submit_guard(:bindingLock, :priceVersion, :projectId, :idempotencyKey)
      RETURNING id
   ), e AS (
     INSERT INTO executions (id, project_id, api_key_id, tool, model, category, status, arguments, price_version,
       total_steps, reserved_micros, idempotency_key, request_digest, lease_expires_at, created_at)
     SELECT :id::text, p.id, :apiKeyId::text, :tool::text, :model::text, :category::text, 'queued', :arguments::jsonb,
            :priceVersion::text, :totalSteps::int, :reserved::bigint, :idempotencyKey::text, :requestDigest::text,
            tes_now() + (:dispatchDeadlineMs::int * interval '1 millisecond'), tes_now() FROM p
     RETURNING ${EXECUTION_SELECT}
   ), ef AS (
     INSERT INTO execution_files (execution_id, file_id, project_id)
     SELECT e.id, f.id, e.project_id FROM e CROSS JOIN f
     RETURNING 1
   ), o AS (
     ${insertOutboxSql('e', ':traceparent::text')}
   ), l AS (
     INSERT INTO ledger_entries (transaction_id, project_id, execution_id, kind, account, amount_micros)
     SELECT :transactionId::text, e.project_id, e.id, 'reserve', v.account, v.amount
       FROM e CROSS JOIN (VALUES ('available', -:reserved::bigint), ('reserved', :reserved::bigint)) AS v(account, amount)
     RETURNING 1
   )
   SELECT e.*, o.id AS outbox_id, o.routing_key AS outbox_routing_key, o.payload AS outbox_payload,
          o.trace_context AS outbox_trace_context FROM e CROSS JOIN o`;

type SubmitRow = ExecutionRow & { outbox_id: number; outbox_routing_key: string; outbox_payload: ExecutionMessage; outbox_trace_context: string | null };

/** The unique index that is the idempotency binding. */
const IDEMPOTENCY_CONSTRAINT = 'executions_project_id_idempotency_key_key';

export async function submitExecution(db: Knex, input: SubmitInput, attempt = 0): Promise<SubmitResult> {
  if (!Number.isSafeInteger(input.reservedMicros) || input.reservedMicros < 0) throw new Error('reservation must be a whole number of micros');
  const r = input.reservedMicros;
  const fileIds = [...new Set(input.fileIds ?? [])];
  let rows: SubmitRow[];
  try {
    ({ rows } = await prepared<{ rows: SubmitRow[] }>(db, 'tes_submit', SUBMIT_SQL, {
      projectId: input.projectId,
      fileIds,
      reserved: r,
      bindingLock: bindingLockKey(input.projectId, input.idempotencyKey),
      priceVersion: input.priceVersion,
      id: input.id,
      apiKeyId: input.apiKeyId,
      tool: input.tool,
      model: input.model,
      category: input.category,
      arguments: JSON.stringify(input.arguments),
      totalSteps: input.totalSteps,
      idempotencyKey: input.idempotencyKey,
      requestDigest: input.requestDigest,
      dispatchDeadlineMs: input.dispatchDeadlineMs,
      transactionId: newId('txn'),
      traceparent: input.traceparent ?? null,
    }));
  } catch (err) {
    // the key is bound already (perhaps by a concurrent twin): nothing of this one was written
    if (!(isUniqueViolation(err) && (err as { constraint?: unknown }).constraint === IDEMPOTENCY_CONSTRAINT)) throw err;
    rows = [];
  }
  const row = rows[0];
  if (row) {
    const outbox = toOutboxEntry({
      id: row.outbox_id,
      routing_key: row.outbox_routing_key,
      payload: row.outbox_payload,
      trace_context: row.outbox_trace_context,
    });
    return { kind: 'created', execution: toExecution(row), outbox };
  }

  // Nothing was written: the key is bound (a resend is answered with its execution whatever
  // the balance is now), an upload expired or was deleted since the gateway checked it, or the
  // balance or the monthly cap refused the reservation.
  const existing = await findBindingSettled(db, input.projectId, input.idempotencyKey);
  if (existing) return { kind: 'existing', execution: existing };
  if (fileIds.length > 0) {
    const live = await db.raw<{ rows: { id: string }[] }>(
      `SELECT id FROM files WHERE project_id = :projectId AND id = ANY(:fileIds::text[]) AND ${notDeleted()} AND expires_at > tes_now()`,
      { projectId: input.projectId, fileIds },
    );
    const gone = fileIds.find((id) => !live.rows.some((row) => row.id === id));
    if (gone) throw new AppError('file_not_found', 'file_not_found', { details: { fileId: gone } });
  }
  const current = await db<{ version: string; seq: number }>('price_versions').select('version').orderBy('seq', 'desc').first();
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
         FROM projects WHERE id = :projectId`,
      { projectId: input.projectId },
    )
  ).rows[0];
  if (!p || p.available_micros < r) {
    throw new AppError('insufficient_balance', 'insufficient_balance', {
      details: { requiredMicros: r, availableMicros: p?.available_micros ?? 0, retryable: false },
    });
  }
  if (p.monthly_cap_micros !== null && p.month_charged + p.reserved_micros + r > p.monthly_cap_micros) {
    throw new AppError('monthly_cap_exceeded', 'monthly_cap_exceeded', { details: { requiredMicros: r, retryable: false } });
  }
  if (attempt < 2) return submitExecution(db, input, attempt + 1);
  throw new AppError('service_unavailable', 'service_unavailable', {
    retryable: true,
    details: { reason: 'the balance changed while the submit was judged; retry' },
  });
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
    await trx.raw('SELECT pg_advisory_xact_lock(hashtextextended(:lock, 0))', { lock: bindingLockKey(projectId, key) });
    return findByIdempotencyKey(trx, projectId, key);
  });
}
