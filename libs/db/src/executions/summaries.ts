/**
 * The operator's reads of executions and their artifacts (the admin CLI's): columns for a
 * table on a terminal, never storage keys. Reads only.
 */
import type { Knex } from 'knex';
import type { ExecutionStatus } from '@tes/core';
import { iso } from '../time';

export interface ExecutionSummary {
  id: string;
  projectId: string;
  apiKeyId: string;
  tool: string;
  model: string;
  status: ExecutionStatus;
  reservedMicros: number;
  chargedMicros: number;
  errorCode: string | null;
  createdAt: string;
  finishedAt: string | null;
}

export interface ExecutionFilter {
  projectId?: string | undefined;
  status?: ExecutionStatus | undefined;
  tool?: string | undefined;
  apiKeyId?: string | undefined;
  /** Created at or after this time. */
  since?: Date | undefined;
  /** The lowest id an execution created at `since` can have (ids are time-sortable). */
  sinceId?: string | undefined;
  /** Keyset paging: older than this id. */
  before?: string | undefined;
  limit: number;
}

/**
 * Newest first. Within a project, executions_project_{list,status,tool}_idx serve each filter
 * with the id range; across projects, needs_review has its own partial index
 * (executions_needs_review_idx), a key executions_api_key_idx, and the rest walk the primary key
 * from the newest, which --since bounds. The id bound makes --since an index range; created_at then decides exactly (the id
 * carries the gateway's clock, created_at the database's).
 */
export async function listExecutionSummaries(db: Knex, f: ExecutionFilter): Promise<{ items: ExecutionSummary[]; hasMore: boolean }> {
  const q = db('executions').select(
    'id',
    'project_id',
    'api_key_id',
    'tool',
    'model',
    'status',
    'reserved_micros',
    'charged_micros',
    'error_code',
    'created_at',
    'finished_at',
  );
  if (f.projectId !== undefined) q.where('project_id', f.projectId);
  if (f.status !== undefined) q.where('status', f.status);
  if (f.tool !== undefined) q.where('tool', f.tool);
  if (f.apiKeyId !== undefined) q.where('api_key_id', f.apiKeyId);
  if (f.sinceId !== undefined) q.where('id', '>=', f.sinceId);
  if (f.since !== undefined) q.where('created_at', '>=', f.since);
  if (f.before !== undefined) q.where('id', '<', f.before);
  const rows = await q.orderBy('id', 'desc').limit(f.limit + 1);
  return {
    hasMore: rows.length > f.limit,
    items: rows.slice(0, f.limit).map((r: Record<string, unknown>) => ({
      id: r.id as string,
      projectId: r.project_id as string,
      apiKeyId: r.api_key_id as string,
      tool: r.tool as string,
      model: r.model as string,
      status: r.status as ExecutionStatus,
      reservedMicros: r.reserved_micros as number,
      chargedMicros: r.charged_micros as number,
      errorCode: r.error_code as string | null,
      createdAt: iso(r.created_at as Date)!,
      finishedAt: iso(r.finished_at as Date | null),
    })),
  };
}

export interface ArtifactLine {
  id: string;
  stepIndex: number;
  format: string;
  sizeBytes: number;
  expiresAt: string;
  deletedAt: string | null;
}

/** An execution's artifacts (artifacts_execution_idx); never their storage keys. */
export async function executionArtifacts(db: Knex, executionId: string): Promise<ArtifactLine[]> {
  const rows = await db('artifacts')
    .select('id', 'step_index', 'format', 'size_bytes', 'expires_at', 'deleted_at')
    .where({ execution_id: executionId })
    .orderBy('id');
  return rows.map((r: Record<string, unknown>) => ({
    id: r.id as string,
    stepIndex: r.step_index as number,
    format: r.format as string,
    sizeBytes: r.size_bytes as number,
    expiresAt: iso(r.expires_at as Date)!,
    deletedAt: iso(r.deleted_at as Date | null),
  }));
}
