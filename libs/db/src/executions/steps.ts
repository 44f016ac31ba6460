/** Step records, fenced by the lease: start (and the cancel fence), finish with artifacts, provider references. */
import type { Knex } from 'knex';
import { prepared } from '../prepared';
import { statusGuard } from './status-guard';
import type { NewArtifact } from './records';

export type StepStart = 'started' | 'cancel_requested' | 'lease_lost';

/**
 * Records that a step starts, fenced by the lease and by cancellation in one statement: no new
 * step starts once a cancel was accepted (docs/api.md#cancel-post-toolsexecutionsidcancel), even a cancel that landed after the
 * claim. 'cancel_requested': the caller settles as cancelled; 'lease_lost': stop.
 *
 * The lease check here, in finishStep and in recordExternalRef locks the execution row FOR
 * SHARE: a claim by another worker or a cancel (an UPDATE of that row) then waits for this
 * statement's commit, or this statement waits for theirs and re-checks the row as they left
 * it. A plain read could pass the check on an old snapshot and commit a step write after the
 * new holder had read the steps, or after a cancel had been answered 202.
 *
 * A step that starts again (its row exists: it had failed, or a crash left it running) starts
 * clean: its provider reference and checkpoint are cleared. They belonged to the previous
 * create; kept, a crash after the new create and before its recordExternalRef would have the
 * next worker resume polling the old job while the new one is billed and untracked (issue #26,
 * defect 5). A re-check of a waiting provider step is not a start: the worker resumes it
 * without calling this (run.ts `resuming`).
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
        WHERE id = :executionId AND project_id = :projectId AND lease_owner = :owner AND ${statusGuard('status', ['running'])}
          FOR SHARE
     ), s AS (
       INSERT INTO execution_steps (execution_id, project_id, index, name, status, external)
       SELECT e.id, e.project_id, :index, :name, 'running', :external FROM e WHERE NOT e.cancel_requested
       ON CONFLICT (execution_id, index) DO UPDATE
          SET status = 'running', attempts = execution_steps.attempts + 1, started_at = now(), finished_at = NULL, error_code = NULL,
              external_ref = NULL, checkpoint = NULL
       RETURNING 1
     )
     SELECT e.cancel_requested FROM e`,
    { executionId: input.executionId, projectId: input.projectId, owner: input.owner, index: input.index, name: input.name, external: input.external ?? false },
  );
  const row = res.rows[0];
  if (!row) return 'lease_lost';
  return row.cancel_requested ? 'cancel_requested' : 'started';
}

/** What a step's end records (finishStep, and finishLastStepAndSettle for an execution's last step). */
export interface StepOutcome {
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
}

/**
 * The step's end as two CTEs, `s` (the fenced step update: it matches only while this owner
 * holds the lease of the running execution, whose row it locks FOR SHARE) and `a` (the
 * artifact rows, only if `s` matched), with their bindings (named step*, so a statement can
 * add its own).
 */
export const FINISH_STEP_CTES = `s AS (
       UPDATE execution_steps s
          SET status = :stepStatus, cost_micros = :stepCostMicros, checkpoint = :stepCheckpoint::jsonb,
              external_ref = coalesce(:stepExternalRef, s.external_ref), error_code = :stepErrorCode, finished_at = now()
        WHERE s.execution_id = :stepExecutionId AND s.index = :stepIndex AND s.status = 'running'
          AND EXISTS (SELECT 1 FROM executions e WHERE e.id = s.execution_id AND e.lease_owner = :stepOwner AND ${statusGuard('e.status', ['running'])} FOR SHARE)
        RETURNING s.execution_id, s.project_id, s.index
     ), a AS (
       INSERT INTO artifacts (id, execution_id, project_id, step_index, format, mime_type, size_bytes, sha256, storage_key, file_name, expires_at)
       SELECT x.id, s.execution_id, s.project_id, s.index, x.format, x.mime_type, x.size_bytes, x.sha256, x.storage_key, x.file_name, x.expires_at
         FROM s CROSS JOIN jsonb_to_recordset(:stepArtifacts::jsonb) AS x(id text, format text, mime_type text, size_bytes bigint, sha256 text,
                                                              storage_key text, file_name text, expires_at timestamptz)
       RETURNING 1
     )`;

export function finishStepBindings(input: StepOutcome): Knex.ValueDict {
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
  return {
    stepStatus: input.status,
    stepCostMicros: input.costMicros,
    stepCheckpoint: input.checkpoint ? JSON.stringify(input.checkpoint) : null,
    stepExternalRef: input.externalRef ?? null,
    stepErrorCode: input.errorCode ?? null,
    stepExecutionId: input.executionId,
    stepIndex: input.index,
    stepOwner: input.owner,
    stepArtifacts: JSON.stringify(artifacts),
  };
}

/** Records a step's outcome and any artifacts it stored, fenced by the lease, in one transaction. */
export async function finishStep(db: Knex, input: StepOutcome): Promise<boolean> {
  // One statement (so one transaction and one round trip): the fenced step update and, only
  // if it matched, the artifact rows it produced.
  const res = await prepared<{ rows: { n: number }[] }>(
    db,
    'tes_finish_step',
    `WITH ${FINISH_STEP_CTES}
     SELECT count(*)::int AS n FROM s`,
    finishStepBindings(input),
  );
  return (res.rows[0]?.n ?? 0) > 0;
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
    `UPDATE execution_steps s SET external_ref = :externalRef, checkpoint = coalesce(:checkpoint::jsonb, s.checkpoint)
      WHERE s.execution_id = :executionId AND s.index = :index AND s.status = 'running'
        AND EXISTS (SELECT 1 FROM executions e WHERE e.id = s.execution_id AND e.lease_owner = :owner AND ${statusGuard('e.status', ['running'])} FOR SHARE)
      RETURNING 1`,
    {
      externalRef: input.externalRef,
      checkpoint: input.checkpoint ? JSON.stringify(input.checkpoint) : null,
      executionId: input.executionId,
      index: input.index,
      owner: input.owner,
    },
  );
  return res.rows.length > 0;
}

/**
 * A running external step without a provider reference is an unknown outcome after a crash
 * (the request may have been taken: needs_review, never a second send), except when the step
 * recorded that the provider took nothing: it refused the request (429, 503) and the step
 * waits to send it again. That record is this marker in the step's checkpoint.
 */
const UNSENT = 'unsent';

/** Whether a step may be resumed without a provider reference: it recorded that nothing was taken (recordStepUnsent). */
export function isUnsentStep(step: { externalRef: string | null; checkpoint: Record<string, unknown> | null }): boolean {
  return step.externalRef === null && step.checkpoint?.[UNSENT] === true;
}

/**
 * Records on a running step that holds no provider reference that the provider took nothing
 * (with a checkpoint for the step's next run), fenced by the lease; `null` clears the record,
 * which the step does before it sends again, so a crash after that send leaves a step without
 * a reference that is never resumed by a second send. False: the lease was lost.
 */
export async function recordStepUnsent(
  db: Knex,
  input: { executionId: string; index: number; owner: string; checkpoint: Record<string, unknown> | null },
): Promise<boolean> {
  const res = await db.raw<{ rows: unknown[] }>(
    `UPDATE execution_steps s SET checkpoint = :checkpoint::jsonb
      WHERE s.execution_id = :executionId AND s.index = :index AND s.status = 'running' AND s.external_ref IS NULL
        AND EXISTS (SELECT 1 FROM executions e WHERE e.id = s.execution_id AND e.lease_owner = :owner AND ${statusGuard('e.status', ['running'])} FOR SHARE)
      RETURNING 1`,
    {
      checkpoint: input.checkpoint ? JSON.stringify({ ...input.checkpoint, [UNSENT]: true }) : null,
      executionId: input.executionId,
      index: input.index,
      owner: input.owner,
    },
  );
  return res.rows.length > 0;
}
