/**
 * The execution record: its columns, how rows map to it, and the project-scoped reads
 * (status polls, lists, steps, artifacts). Every write lives beside it, one file per job:
 * submit.ts, lease.ts, steps.ts, settle.ts.
 */
import type { Knex } from 'knex';
import type { ExecutionStatus } from '@tes/core';
import { prepared } from '../prepared';
import { iso } from '../time';

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

/**
 * The mappers below are the typed boundary between rows and records: a row type states what
 * node-postgres returns for the columns (int8 as a number, see knex.ts; timestamptz as a Date,
 * or an ISO string inside json_agg; jsonb parsed).
 */
export interface ExecutionRow {
  id: string;
  project_id: string;
  api_key_id: string;
  tool: string;
  model: string;
  category: string;
  status: ExecutionStatus;
  arguments: Record<string, unknown>;
  price_version: string;
  total_steps: number;
  reserved_micros: number;
  charged_micros: number;
  cancel_requested: boolean;
  idempotency_key: string;
  request_digest: string;
  output: Record<string, unknown> | null;
  error_code: string | null;
  error_message: string | null;
  lease_owner: string | null;
  attempts: number;
  /** A Date, or the ISO string itself where the statement formats it (UTC_ISO). */
  created_at: Date | string;
  started_at: Date | string | null;
  finished_at: Date | string | null;
}

interface StepRow {
  execution_id: string;
  index: number;
  name: string;
  status: StepRecord['status'];
  cost_micros: number;
  external_ref: string | null;
  checkpoint: Record<string, unknown> | null;
  error_code: string | null;
  attempts: number;
  started_at: Date | string;
  finished_at: Date | string | null;
}

const EXECUTION_COLUMNS: (keyof ExecutionRow)[] = [
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
];
export const EXECUTION_SELECT = EXECUTION_COLUMNS.join(', ');

export function toExecution(row: ExecutionRow): ExecutionRecord {
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
    createdAt: isoOf(row.created_at)!,
    startedAt: isoOf(row.started_at),
    finishedAt: isoOf(row.finished_at),
  };
}

/**
 * A timestamptz as Postgres formats it for the API, in UTC to the millisecond (to_char
 * truncates the microseconds, as Date does): what Date#toISOString gives for the same value,
 * without node-postgres parsing it into a Date and the mapper formatting it back. The status
 * poll, the most frequent read, reads its timestamps this way.
 */
const utcIso = (column: string): string => `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;
const CANONICAL_ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

/** iso(), with a string already in Date#toISOString's form (utcIso) taken as it is. */
function isoOf(value: Date | string | null): string | null {
  return typeof value === 'string' && CANONICAL_ISO.test(value) ? value : iso(value);
}

function toStep(row: StepRow): StepRecord {
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
    startedAt: isoOf(row.started_at)!,
    finishedAt: isoOf(row.finished_at),
  };
}

export async function findByIdempotencyKey(db: Knex, projectId: string, key: string): Promise<ExecutionRecord | null> {
  const row = await db<ExecutionRow>('executions').select(EXECUTION_COLUMNS).where({ project_id: projectId, idempotency_key: key }).first();
  return row ? toExecution(row) : null;
}

/** Project-scoped read: another project's id is indistinguishable from an unknown one. */
export async function getExecution(db: Knex, projectId: string, id: string): Promise<ExecutionRecord | null> {
  const row = await db<ExecutionRow>('executions').select(EXECUTION_COLUMNS).where({ id, project_id: projectId }).first();
  return row ? toExecution(row) : null;
}

/** An execution as the API shows it: the record, its steps, and its version. */
export interface ExecutionView {
  execution: ExecutionRecord;
  steps: StepRecord[];
  /**
   * Grows with every change the public execution object shows (status, a step starting or
   * ending, cancelRequested, ...), in the order they committed (migration 20261123000013):
   * the id of its server-sent events.
   */
  version: number;
  /** Its place in line while queued, where the reader asked for it (withQueuePlace). */
  queue?: QueuePlace | null;
}

/** A queued execution's place in line (queue-position.ts): what progress.queuePosition and progress.estimatedStartAt show. */
export interface QueuePlace {
  /** 1 = the next execution of its category the fair order starts; n = n - 1 start before it. */
  queuePosition: number;
  /** The database clock plus position / the category's recent start rate; null without a recent start. */
  estimatedStartAt: string | null;
}

const TIMESTAMP_COLUMNS = new Set<string>(['created_at', 'started_at', 'finished_at']);
/** The execution's columns as the poll reads them: its timestamps formatted by Postgres (utcIso). */
const POLL_COLUMNS = EXECUTION_COLUMNS.map((c) => (TIMESTAMP_COLUMNS.has(c) ? `${utcIso(`e.${c}`)} AS ${c}` : `e.${c}`)).join(', ');

/**
 * An execution of the project with its steps and version, in one round trip (the status
 * poll, the most frequent read of the API).
 */
export async function getExecutionWithSteps(db: Knex, projectId: string, id: string): Promise<ExecutionView | null> {
  const res = await prepared<{ rows: (ExecutionRow & { steps: StepRow[]; version: string })[] }>(
    db,
    'tes_execution_poll',
    // one pass over the execution's steps (its primary key) for both the steps and the version
    `SELECT ${POLL_COLUMNS},
            coalesce(s.steps, '[]'::json) AS steps, GREATEST(e.change_seq, coalesce(s.version, 0)) AS version
       FROM executions e
       LEFT JOIN LATERAL (
         SELECT json_agg(json_build_object(
                  'execution_id', s.execution_id, 'index', s.index, 'name', s.name, 'status', s.status,
                  'cost_micros', s.cost_micros, 'external_ref', s.external_ref, 'checkpoint', s.checkpoint,
                  'error_code', s.error_code, 'attempts', s.attempts, 'started_at', ${utcIso('s.started_at')},
                  'finished_at', ${utcIso('s.finished_at')}) ORDER BY s.index) FILTER (WHERE s.project_id = e.project_id) AS steps,
                max(s.change_seq) AS version
           FROM execution_steps s WHERE s.execution_id = e.id
       ) s ON true
      WHERE e.id = :id AND e.project_id = :projectId`,
    { id, projectId },
  );
  const row = res.rows[0];
  if (!row) return null;
  return { execution: toExecution(row), steps: row.steps.map(toStep), version: Number(row.version) };
}

/**
 * The current version of each of these executions (see ExecutionView.version), in one
 * statement: how a watcher finds, cheaply, which of many executions changed.
 */
export async function getExecutionVersions(db: Knex, ids: readonly string[]): Promise<Map<string, number>> {
  if (ids.length === 0) return new Map();
  const res = await db.raw<{ rows: { id: string; version: string }[] }>(
    `SELECT e.id, GREATEST(e.change_seq, coalesce((SELECT max(s.change_seq) FROM execution_steps s WHERE s.execution_id = e.id), 0)) AS version
       FROM executions e WHERE e.id = ANY(:ids::text[])`,
    { ids: [...ids] },
  );
  return new Map(res.rows.map((r) => [r.id, Number(r.version)]));
}

/** Worker-side read by id alone (messages carry both ids; the worker checks they agree). */
export async function getExecutionById(db: Knex, id: string): Promise<ExecutionRecord | null> {
  const row = await db<ExecutionRow>('executions').select(EXECUTION_COLUMNS).where({ id }).first();
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
  const query = db<ExecutionRow>('executions').select(EXECUTION_COLUMNS).where('project_id', q.projectId);
  if (q.status) query.andWhere('status', q.status);
  if (q.tool) query.andWhere('tool', q.tool);
  if (q.before) query.andWhere('id', '<', q.before);
  const rows = await query.orderBy('id', 'desc').limit(q.limit + 1);
  const hasMore = rows.length > q.limit;
  return { items: rows.slice(0, q.limit).map(toExecution), hasMore };
}

export async function getSteps(db: Knex, projectId: string, executionIds: string[]): Promise<StepRecord[]> {
  if (executionIds.length === 0) return [];
  const rows = await db<StepRow>('execution_steps')
    .select('execution_id', 'index', 'name', 'status', 'cost_micros', 'external_ref', 'checkpoint', 'error_code', 'attempts', 'started_at', 'finished_at')
    .where('project_id', projectId)
    .whereIn('execution_id', executionIds)
    .orderBy([{ column: 'execution_id' }, { column: 'index' }]);
  return rows.map(toStep);
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

export interface ArtifactRecord extends NewArtifact {
  executionId: string;
  projectId: string;
  deletedAt: string | null;
  /**
   * Milliseconds before it expires by the database's clock (tes_now(), the janitor's): ≤ 0 when
   * expired. Compare this, not expiresAt with a process's clock, which may be off the database's.
   */
  msLeft: number;
}

interface ArtifactRow {
  id: string;
  execution_id: string;
  project_id: string;
  format: string;
  mime_type: string;
  size_bytes: number;
  sha256: string;
  storage_key: string;
  file_name: string;
  expires_at: Date;
  deleted_at: Date | null;
  ms_left: number;
}

export async function getArtifact(db: Knex, projectId: string, executionId: string, artifactId: string): Promise<ArtifactRecord | null> {
  const row = await db<ArtifactRow>('artifacts')
    .select('id', 'execution_id', 'project_id', 'format', 'mime_type', 'size_bytes', 'sha256', 'storage_key', 'file_name', 'expires_at', 'deleted_at')
    .select(db.raw('(extract(epoch FROM expires_at - tes_now()) * 1000)::float8 AS ms_left'))
    .where({ id: artifactId, execution_id: executionId, project_id: projectId })
    .first<ArtifactRow | undefined>();
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
    msLeft: row.ms_left,
  };
}
