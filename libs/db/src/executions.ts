import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import { prepared } from './prepared';
import { isUniqueViolation } from './pg-errors';
import { AppError, type ExecutionStatus } from '@tes/core';
import { iso } from './time';

export interface ArtifactSummary {
  id: string;
  format: string;
  mimeType: string;
  sizeBytes: number;
  sha256: string;
  expiresAt: string;
}

export interface ExecutionRecord {
  id: string;
  projectId: string;
  apiKeyId: string;
  tool: string;
  model: string;
  category: string;
  status: ExecutionStatus;
  arguments: Record<string, unknown>;
  priceVersion: string;
  totalSteps: number;
  reservedMicros: number;
  chargedMicros: number;
  cancelRequested: boolean;
  idempotencyKey: string;
  requestDigest: string;
  output: Record<string, unknown> | null;
  errorCode: string | null;
  errorMessage: string | null;
  leaseOwner: string | null;
  attempts: number;
  createdAt: string;
  startedAt: string | null;
  finishedAt: string | null;
}

export interface StepRecord {
  executionId: string;
  index: number;
  name: string;
  status: 'running' | 'succeeded' | 'failed' | 'cancelled';
  costMicros: number;
  externalRef: string | null;
  checkpoint: Record<string, unknown> | null;
  errorCode: string | null;
  attempts: number;
  startedAt: string;
  finishedAt: string | null;
}

const EXECUTION_COLUMNS = [
  'id',
  'project_id',
  'api_key_id',
  'tool',
  'model',
  'category',
  'status',
  'arguments',
  'price_version',
  'total_steps',
  'reserved_micros',
  'charged_micros',
  'cancel_requested',
  'idempotency_key',
  'request_digest',
  'output',
  'error_code',
  'error_message',
  'lease_owner',
  'attempts',
  'created_at',
  'started_at',
  'finished_at',
] as const;
const EXECUTION_SELECT = EXECUTION_COLUMNS.join(', ');

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export function toExecution(row: any): ExecutionRecord {
  return {
    id: row.id,
    projectId: row.project_id,
    apiKeyId: row.api_key_id,
    tool: row.tool,
    model: row.model,
    category: row.category,
    status: row.status,
    arguments: row.arguments,
    priceVersion: row.price_version,
    totalSteps: row.total_steps,
    reservedMicros: row.reserved_micros,
    chargedMicros: row.charged_micros,
    cancelRequested: row.cancel_requested,
    idempotencyKey: row.idempotency_key,
    requestDigest: row.request_digest,
    output: row.output,
    errorCode: row.error_code,
    errorMessage: row.error_message,
    leaseOwner: row.lease_owner,
    attempts: row.attempts,
    createdAt: iso(row.created_at) as string,
    startedAt: iso(row.started_at),
    finishedAt: iso(row.finished_at),
  };
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
function toStep(row: any): StepRecord {
  return {
    executionId: row.execution_id,
    index: row.index,
    name: row.name,
    status: row.status,
    costMicros: row.cost_micros,
    externalRef: row.external_ref,
    checkpoint: row.checkpoint,
    errorCode: row.error_code,
    attempts: row.attempts,
    startedAt: iso(row.started_at) as string,
    finishedAt: iso(row.finished_at),
  };
}

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

export async function findByIdempotencyKey(db: Knex, projectId: string, key: string): Promise<ExecutionRecord | null> {
  const row = await db('executions').select(EXECUTION_COLUMNS).where({ project_id: projectId, idempotency_key: key }).first();
  return row ? toExecution(row) : null;
}

/** Project-scoped read: another project's id is indistinguishable from an unknown one. */
export async function getExecution(db: Knex, projectId: string, id: string): Promise<ExecutionRecord | null> {
  const row = await db('executions').select(EXECUTION_COLUMNS).where({ id, project_id: projectId }).first();
  return row ? toExecution(row) : null;
}

/**
 * An execution of the project with its steps, in one round trip (the status poll, the most
 * frequent read of the API).
 */
export async function getExecutionWithSteps(db: Knex, projectId: string, id: string): Promise<{ execution: ExecutionRecord; steps: StepRecord[] } | null> {
  const res = await prepared<{ rows: (Record<string, unknown> & { steps: Record<string, unknown>[] })[] }>(
    db,
    'tes_execution_poll',
    `SELECT ${EXECUTION_COLUMNS.map((c) => `e.${c}`).join(', ')},
            coalesce((SELECT json_agg(json_build_object(
                        'execution_id', s.execution_id, 'index', s.index, 'name', s.name, 'status', s.status,
                        'cost_micros', s.cost_micros, 'external_ref', s.external_ref, 'checkpoint', s.checkpoint,
                        'error_code', s.error_code, 'attempts', s.attempts, 'started_at', s.started_at,
                        'finished_at', s.finished_at) ORDER BY s.index)
                        FROM execution_steps s WHERE s.execution_id = e.id AND s.project_id = e.project_id), '[]'::json) AS steps
       FROM executions e WHERE e.id = ? AND e.project_id = ?`,
    [id, projectId],
  );
  const row = res.rows[0];
  if (!row) return null;
  return { execution: toExecution(row), steps: row.steps.map(toStep) };
}

/** Worker-side read by id alone (messages carry both ids; the worker checks they agree). */
export async function getExecutionById(db: Knex, id: string): Promise<ExecutionRecord | null> {
  const row = await db('executions').select(EXECUTION_COLUMNS).where({ id }).first();
  return row ? toExecution(row) : null;
}

export interface ListQuery {
  projectId: string;
  limit: number;
  before?: string | undefined;
  status?: ExecutionStatus | undefined;
  tool?: string | undefined;
}

/** Newest first, keyset-paged on the time-sortable id (index executions_project_*_idx). */
export async function listExecutions(db: Knex, q: ListQuery): Promise<{ items: ExecutionRecord[]; hasMore: boolean }> {
  const query = db('executions').select(EXECUTION_COLUMNS).where('project_id', q.projectId);
  if (q.status) query.andWhere('status', q.status);
  if (q.tool) query.andWhere('tool', q.tool);
  if (q.before) query.andWhere('id', '<', q.before);
  const rows = await query.orderBy('id', 'desc').limit(q.limit + 1);
  const hasMore = rows.length > q.limit;
  return { items: rows.slice(0, q.limit).map(toExecution), hasMore };
}

export async function getSteps(db: Knex, projectId: string, executionIds: string[]): Promise<StepRecord[]> {
  if (executionIds.length === 0) return [];
  const rows = await db('execution_steps')
    .select('execution_id', 'index', 'name', 'status', 'cost_micros', 'external_ref', 'checkpoint', 'error_code', 'attempts', 'started_at', 'finished_at')
    .where('project_id', projectId)
    .whereIn('execution_id', executionIds)
    .orderBy([{ column: 'execution_id' }, { column: 'index' }]);
  return rows.map(toStep);
}

export interface SettleInput {
  executionId: string;
  projectId: string;
  status: 'succeeded' | 'failed' | 'cancelled';
  chargedMicros: number;
  /** The execution must be in one of these states, else nothing changes. */
  from: ExecutionStatus[];
  /** When set, the worker's lease must still be held: a zombie worker's settle changes nothing. */
  leaseOwner?: string | undefined;
  output?: Record<string, unknown> | null;
  errorCode?: string | null;
  errorMessage?: string | null;
  kind?: 'settle' | 'resolve';
  /** Also record that cancellation was requested (queued work cancelled at once). */
  cancelRequested?: boolean;
}

export interface SettleResult {
  id: string;
  tool: string;
  reservedMicros: number;
  chargedMicros: number;
  createdAt: string;
}

/**
 * Settlement (architecture.md, path 3) in one statement, so one transaction: the fenced
 * terminal status, the charge (never above the reservation), the release of the rest to
 * the available balance, this month's cap counter, the usage counter and the journal.
 * Returns null when the fence did not match: someone else already moved the execution.
 */
export async function settleExecution(db: Knex, input: SettleInput): Promise<SettleResult | null> {
  if (!Number.isSafeInteger(input.chargedMicros) || input.chargedMicros < 0) throw new Error('charge must be a whole number of micros');
  const bindings: Knex.RawBinding[] = [
    input.status,
    input.chargedMicros,
    input.output === undefined || input.output === null ? null : JSON.stringify(input.output),
    input.errorCode ?? null,
    input.errorMessage ?? null,
    input.cancelRequested ?? false,
    input.executionId,
    input.projectId,
    input.from,
  ];
  let leaseFence = '';
  if (input.leaseOwner !== undefined) {
    leaseFence = 'AND lease_owner = ?';
    bindings.push(input.leaseOwner);
  }
  bindings.push(randomUUID(), input.kind ?? 'settle');
  const res = await prepared<{ rows: { id: string; tool: string; reserved_micros: number; charged_micros: number; created_at: Date }[] }>(
    db,
    leaseFence ? 'tes_settle_fenced' : 'tes_settle',
    `WITH e AS (
       UPDATE executions
          SET status = ?, charged_micros = LEAST(?::bigint, reserved_micros), output = ?::jsonb,
              error_code = ?, error_message = ?, cancel_requested = cancel_requested OR ?::boolean,
              finished_at = tes_now(), settled_at = tes_now(), updated_at = now(),
              lease_owner = NULL, lease_expires_at = NULL
        WHERE id = ? AND project_id = ? AND status = ANY(?::text[]) ${leaseFence}
        RETURNING id, project_id, tool, reserved_micros, charged_micros, created_at
     ), p AS (
       UPDATE projects
          SET reserved_micros = projects.reserved_micros - e.reserved_micros,
              available_micros = projects.available_micros + e.reserved_micros - e.charged_micros,
              -- The month is the database's; cap_month never moves backwards, so a settle
              -- that reads an older month cannot wipe the current month's charges.
              month_charged_micros = (CASE WHEN cap_month >= tes_month() THEN month_charged_micros ELSE 0 END) + e.charged_micros,
              cap_month = GREATEST(cap_month, tes_month())
         FROM e WHERE projects.id = e.project_id
        RETURNING projects.id
     ), u AS (
       INSERT INTO usage_counters (project_id, month, execution_count, charged_micros)
       SELECT e.project_id, tes_month(), 1, e.charged_micros FROM e
       ON CONFLICT (project_id, month) DO UPDATE
          SET execution_count = usage_counters.execution_count + 1,
              charged_micros = usage_counters.charged_micros + excluded.charged_micros
       RETURNING 1
     ), l AS (
       INSERT INTO ledger_entries (transaction_id, project_id, execution_id, kind, account, amount_micros)
       SELECT ?, e.project_id, e.id, ?, v.account, v.amount
         FROM e CROSS JOIN LATERAL (VALUES
           ('reserved', -e.reserved_micros),
           ('available', e.reserved_micros - e.charged_micros),
           ('charged', e.charged_micros)) AS v(account, amount)
       RETURNING 1
     )
     SELECT e.id, e.tool, e.reserved_micros, e.charged_micros, e.created_at FROM e`,
    bindings,
  );
  const row = res.rows[0];
  if (!row) return null;
  return { id: row.id, tool: row.tool, reservedMicros: row.reserved_micros, chargedMicros: row.charged_micros, createdAt: iso(row.created_at) as string };
}

/**
 * Claims an execution for a worker with a lease. Succeeds for queued work, for running
 * work whose lease has expired or was released, and for waiting work (a provider re-check).
 * Returns null when the execution is terminal, waiting for an operator, or held by a live
 * lease. A claim spends no attempt: only a lease lost to a crash or a hang does (the reaper
 * counts those), so hand-backs at shutdown and re-checks never wear an execution out.
 *
 * `firstClaim` is true when the execution was never claimed before. It then has no recorded
 * steps and the caller need not read them. Any other claim must read its steps in a statement of its own: a subquery
 * here would see the snapshot taken before this UPDATE waited for the row lock, and could miss
 * what the previous lease holder recorded meanwhile.
 */
export async function claimExecution(db: Knex, id: string, owner: string, leaseTtlMs: number): Promise<(ExecutionRecord & { firstClaim: boolean }) | null> {
  const res = await prepared<{ rows: (Record<string, unknown> & { first_claim: boolean })[] }>(
    db,
    'tes_claim',
    `UPDATE executions
        SET status = 'running', lease_owner = ?, lease_expires_at = tes_now() + (? * interval '1 millisecond'),
            started_at = coalesce(started_at, tes_now()), claims = claims + 1, updated_at = now()
      WHERE id = ? AND status IN ('queued', 'running', 'waiting')
        AND (lease_owner IS NULL OR lease_expires_at < tes_now())
      RETURNING ${EXECUTION_SELECT}, (claims = 1) AS first_claim`,
    [owner, leaseTtlMs, id],
  );
  const row = res.rows[0];
  return row ? { ...toExecution(row), firstClaim: row.first_claim } : null;
}

/** Extends the lease; null means it was lost (expired and taken, or the execution moved on). */
export async function renewLease(
  db: Knex,
  id: string,
  owner: string,
  leaseTtlMs: number,
): Promise<{ cancelRequested: boolean } | null> {
  const res = await prepared<{ rows: { cancel_requested: boolean }[] }>(
    db,
    'tes_renew_lease',
    `UPDATE executions SET lease_expires_at = tes_now() + (? * interval '1 millisecond')
      WHERE id = ? AND lease_owner = ? AND status = 'running'
      RETURNING cancel_requested`,
    [leaseTtlMs, id, owner],
  );
  const row = res.rows[0];
  return row ? { cancelRequested: row.cancel_requested } : null;
}

export type StepStart = 'started' | 'cancel_requested' | 'lease_lost';

/**
 * Records that a step starts, fenced by the lease and by cancellation in one statement: no new
 * step starts once a cancel was accepted (api-contract.md), even a cancel that landed after the
 * claim. 'cancel_requested': the caller settles as cancelled; 'lease_lost': stop.
 *
 * The lease check here, in finishStep and in recordExternalRef locks the execution row FOR
 * SHARE: a claim by another worker or a cancel (an UPDATE of that row) then waits for this
 * statement's commit, or this statement waits for theirs and re-checks the row as they left
 * it. A plain read could pass the check on an old snapshot and commit a step write after the
 * new holder had read the steps, or after a cancel had been answered 202.
 */
export async function startStep(
  db: Knex,
  input: { executionId: string; projectId: string; index: number; name: string; owner: string; external?: boolean },
): Promise<StepStart> {
  const res = await prepared<{ rows: { cancel_requested: boolean }[] }>(
    db,
    'tes_start_step',
    `WITH e AS (
       SELECT id, project_id, cancel_requested FROM executions
        WHERE id = ? AND project_id = ? AND lease_owner = ? AND status = 'running'
          FOR SHARE
     ), s AS (
       INSERT INTO execution_steps (execution_id, project_id, index, name, status, external)
       SELECT e.id, e.project_id, ?, ?, 'running', ? FROM e WHERE NOT e.cancel_requested
       ON CONFLICT (execution_id, index) DO UPDATE
          SET status = 'running', attempts = execution_steps.attempts + 1, started_at = now(), finished_at = NULL, error_code = NULL
       RETURNING 1
     )
     SELECT e.cancel_requested FROM e`,
    [input.executionId, input.projectId, input.owner, input.index, input.name, input.external ?? false],
  );
  const row = res.rows[0];
  if (!row) return 'lease_lost';
  return row.cancel_requested ? 'cancel_requested' : 'started';
}

export interface NewArtifact {
  id: string;
  format: string;
  mimeType: string;
  sizeBytes: number;
  sha256: string;
  storageKey: string;
  fileName: string;
  expiresAt: Date;
}

/** Records a step's outcome and any artifacts it stored, fenced by the lease, in one transaction. */
export async function finishStep(
  db: Knex,
  input: {
    executionId: string;
    projectId: string;
    index: number;
    owner: string;
    status: 'succeeded' | 'failed' | 'cancelled';
    costMicros: number;
    checkpoint?: Record<string, unknown> | null;
    externalRef?: string | null;
    errorCode?: string | null;
    artifacts?: NewArtifact[];
  },
): Promise<boolean> {
  // One statement (so one transaction and one round trip): the fenced step update and, only
  // if it matched, the artifact rows it produced.
  const artifacts = (input.artifacts ?? []).map((a) => ({
    id: a.id,
    format: a.format,
    mime_type: a.mimeType,
    size_bytes: a.sizeBytes,
    sha256: a.sha256,
    storage_key: a.storageKey,
    file_name: a.fileName,
    expires_at: a.expiresAt.toISOString(),
  }));
  const res = await prepared<{ rows: { n: number }[] }>(
    db,
    'tes_finish_step',
    `WITH s AS (
       UPDATE execution_steps s
          SET status = ?, cost_micros = ?, checkpoint = ?::jsonb, external_ref = coalesce(?, s.external_ref),
              error_code = ?, finished_at = now()
        WHERE s.execution_id = ? AND s.index = ? AND s.status = 'running'
          AND EXISTS (SELECT 1 FROM executions e WHERE e.id = s.execution_id AND e.lease_owner = ? AND e.status = 'running' FOR SHARE)
        RETURNING s.execution_id, s.project_id, s.index
     ), a AS (
       INSERT INTO artifacts (id, execution_id, project_id, step_index, format, mime_type, size_bytes, sha256, storage_key, file_name, expires_at)
       SELECT x.id, s.execution_id, s.project_id, s.index, x.format, x.mime_type, x.size_bytes, x.sha256, x.storage_key, x.file_name, x.expires_at
         FROM s CROSS JOIN jsonb_to_recordset(?::jsonb) AS x(id text, format text, mime_type text, size_bytes bigint, sha256 text,
                                                              storage_key text, file_name text, expires_at timestamptz)
       RETURNING 1
     )
     SELECT count(*)::int AS n FROM s`,
    [
      input.status,
      input.costMicros,
      input.checkpoint ? JSON.stringify(input.checkpoint) : null,
      input.externalRef ?? null,
      input.errorCode ?? null,
      input.executionId,
      input.index,
      input.owner,
      JSON.stringify(artifacts),
    ],
  );
  return (res.rows[0]?.n ?? 0) > 0;
}

/**
 * A step handed work to an external provider and must wait for it: the execution moves to
 * `waiting` and frees its lease; in the same transaction an outbox row schedules the
 * re-check (published to the delay queue, which dead-letters back to the work queue).
 * lease_expires_at becomes the deadline by which a re-check must have happened; past it the
 * reaper publishes one itself, so a lost delay message cannot strand the execution.
 */
export async function enterWaiting(
  db: Knex,
  input: { executionId: string; projectId: string; owner: string; routingKey: string; recheckDeadlineMs: number },
): Promise<number | null> {
  return db.transaction(async (trx) => {
    const moved = await trx.raw<{ rows: unknown[] }>(
      `UPDATE executions SET status = 'waiting', lease_owner = NULL,
              lease_expires_at = tes_now() + (? * interval '1 millisecond'), updated_at = now()
        WHERE id = ? AND lease_owner = ? AND status = 'running'
        RETURNING 1`,
      [input.recheckDeadlineMs, input.executionId, input.owner],
    );
    if (moved.rows.length === 0) return null;
    const row = await trx.raw<{ rows: { id: number }[] }>(
      `INSERT INTO outbox (project_id, execution_id, routing_key, payload) VALUES (?, ?, ?, ?) RETURNING id`,
      [input.projectId, input.executionId, input.routingKey, JSON.stringify({ executionId: input.executionId, projectId: input.projectId, recheck: true })],
    );
    return row.rows[0]!.id;
  });
}

/**
 * Records a provider's job reference (and a small checkpoint) on a running step, fenced by
 * the lease, before the worker waits on it. Once recorded, a crash is recoverable: the next
 * worker polls the job instead of sending the request again.
 */
export async function recordExternalRef(
  db: Knex,
  input: { executionId: string; index: number; owner: string; externalRef: string; checkpoint?: Record<string, unknown> | null },
): Promise<boolean> {
  const res = await db.raw<{ rows: unknown[] }>(
    `UPDATE execution_steps s SET external_ref = ?, checkpoint = coalesce(?::jsonb, s.checkpoint)
      WHERE s.execution_id = ? AND s.index = ? AND s.status = 'running'
        AND EXISTS (SELECT 1 FROM executions e WHERE e.id = s.execution_id AND e.lease_owner = ? AND e.status = 'running' FOR SHARE)
      RETURNING 1`,
    [input.externalRef, input.checkpoint ? JSON.stringify(input.checkpoint) : null, input.executionId, input.index, input.owner],
  );
  return res.rows.length > 0;
}

/** Moves an execution to needs_review, keeping its reservation held (no settlement). */
export async function markNeedsReview(
  db: Knex,
  input: { executionId: string; owner?: string; errorCode: string; errorMessage: string },
): Promise<boolean> {
  const bindings: Knex.RawBinding[] = [input.errorCode, input.errorMessage, input.executionId];
  let fence = '';
  if (input.owner !== undefined) {
    fence = 'AND lease_owner = ?';
    bindings.push(input.owner);
  }
  const res = await db.raw<{ rows: unknown[] }>(
    `UPDATE executions SET status = 'needs_review', error_code = ?, error_message = ?, lease_owner = NULL,
            lease_expires_at = NULL, updated_at = now()
      WHERE id = ? AND status IN ('running', 'waiting') ${fence}
      RETURNING 1`,
    bindings,
  );
  return res.rows.length > 0;
}

export type CancelOutcome =
  | { kind: 'cancelled'; execution: ExecutionRecord }
  | { kind: 'requested'; execution: ExecutionRecord }
  | { kind: 'unchanged'; execution: ExecutionRecord }
  | { kind: 'not_cancellable'; execution: ExecutionRecord };

/**
 * Cancel: queued work is settled as cancelled at once (whole reservation released in the
 * same transaction as the state change); running or waiting work gets cancel_requested and
 * the worker stops before its next step. The queued attempt is fenced on status, so a
 * worker that claimed the execution a moment earlier wins and we fall through to a request.
 */
export async function cancelExecution(db: Knex, projectId: string, execution: ExecutionRecord): Promise<CancelOutcome> {
  if (execution.status === 'queued') {
    const settled = await settleExecution(db, {
      executionId: execution.id,
      projectId,
      status: 'cancelled',
      chargedMicros: 0,
      from: ['queued'],
      errorCode: null,
      cancelRequested: true,
    });
    if (settled) {
      return { kind: 'cancelled', execution: (await getExecution(db, projectId, execution.id))! };
    }
  }
  const res = await db.raw<{ rows: unknown[] }>(
    `UPDATE executions SET cancel_requested = true, updated_at = now()
      WHERE id = ? AND project_id = ? AND status IN ('running', 'waiting')
      RETURNING ${EXECUTION_SELECT}`,
    [execution.id, projectId],
  );
  if (res.rows[0]) return { kind: 'requested', execution: toExecution(res.rows[0]) };
  const current = (await getExecution(db, projectId, execution.id))!;
  if (current.status === 'cancelled') return { kind: 'unchanged', execution: current };
  if (current.status === 'queued') return cancelExecution(db, projectId, current);
  return { kind: 'not_cancellable', execution: current };
}

export interface ArtifactRecord extends NewArtifact {
  executionId: string;
  projectId: string;
  deletedAt: string | null;
}

export async function getArtifact(db: Knex, projectId: string, executionId: string, artifactId: string): Promise<ArtifactRecord | null> {
  const row = await db('artifacts')
    .select('id', 'execution_id', 'project_id', 'format', 'mime_type', 'size_bytes', 'sha256', 'storage_key', 'file_name', 'expires_at', 'deleted_at')
    .where({ id: artifactId, execution_id: executionId, project_id: projectId })
    .first();
  if (!row) return null;
  return {
    id: row.id,
    executionId: row.execution_id,
    projectId: row.project_id,
    format: row.format,
    mimeType: row.mime_type,
    sizeBytes: row.size_bytes,
    sha256: row.sha256,
    storageKey: row.storage_key,
    fileName: row.file_name,
    expiresAt: new Date(row.expires_at),
    deletedAt: iso(row.deleted_at),
  };
}

/**
 * Gives a lease back early (shutdown, transient failure) so a redelivery can claim at once.
 * The execution keeps a deadline: the worker re-sends its message through a delay queue, and
 * if that message is lost the reaper publishes one when `recheckDeadlineMs` has passed. (A
 * NULL deadline would never be "past": the execution would stay running with its money held.)
 */
export async function releaseLease(db: Knex, id: string, owner: string, recheckDeadlineMs: number): Promise<boolean> {
  const res = await db.raw<{ rows: unknown[] }>(
    `UPDATE executions SET lease_owner = NULL, lease_expires_at = tes_now() + (? * interval '1 millisecond'), updated_at = now()
      WHERE id = ? AND lease_owner = ? AND status = 'running'
      RETURNING 1`,
    [recheckDeadlineMs, id, owner],
  );
  return res.rows.length > 0;
}

/** Leases lost to a crash or a hang before an execution is given up (see reapExpiredLeases). */
export const MAX_ATTEMPTS = 5;

export type AbandonOutcome = 'failed' | 'needs_review' | 'not_abandoned';

/**
 * Gives up on an execution nobody can finish (its messages were dead-lettered, or it was
 * claimed MAX_ATTEMPTS times without ending): if a step that calls an external provider
 * was started and never recorded an outcome, it may have run and cost money, so the
 * execution goes to needs_review with its reservation held; otherwise it fails and is
 * charged for the steps that completed. Only an execution nobody holds a live lease on is
 * touched (row locked, so a worker's claim waits and then sees the terminal state).
 */
export async function abandonExecution(
  db: Knex,
  input: { executionId: string; errorCode: string; errorMessage: string },
): Promise<AbandonOutcome> {
  return db.transaction(async (trx) => {
    const locked = await trx.raw<{ rows: { id: string; project_id: string; reserved_micros: number }[] }>(
      `SELECT id, project_id, reserved_micros FROM executions
        WHERE id = ? AND status IN ('queued', 'running')
          AND (lease_owner IS NULL OR lease_expires_at < tes_now())
        FOR UPDATE`,
      [input.executionId],
    );
    const e = locked.rows[0];
    if (!e) return 'not_abandoned';
    const steps = await trx('execution_steps').select('status', 'external', 'cost_micros').where({ execution_id: e.id });
    const unknownExternal = steps.some((s: { status: string; external: boolean }) => s.status === 'running' && s.external);
    if (unknownExternal) {
      await trx('executions').where({ id: e.id }).update({
        status: 'needs_review',
        error_code: input.errorCode,
        error_message: `${input.errorMessage}; a provider step's outcome is unknown`,
        lease_owner: null,
        lease_expires_at: null,
        updated_at: trx.fn.now(),
      });
      return 'needs_review';
    }
    const cost = steps
      .filter((s: { status: string }) => s.status === 'succeeded')
      .reduce((sum: number, s: { cost_micros: number }) => sum + s.cost_micros, 0);
    const settled = await settleExecution(trx, {
      executionId: e.id,
      projectId: e.project_id,
      status: 'failed',
      chargedMicros: Math.min(cost, e.reserved_micros),
      from: ['queued', 'running'],
      errorCode: input.errorCode,
      errorMessage: input.errorMessage,
    });
    return settled ? 'failed' : 'not_abandoned';
  });
}
