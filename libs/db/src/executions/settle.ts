/** Ending an execution: settlement, cancellation, abandonment (docs/architecture.md#the-paths-that-must-never-lose-money-or-work). */
import type { Knex } from 'knex';
import { newId, type ExecutionStatus } from '@tes/core';
import { prepared } from '../prepared';
import { iso } from '../time';
import { EXECUTION_SELECT, getExecution, toExecution, type ExecutionRecord, type ExecutionRow } from './records';
import { FINISH_STEP_CTES, finishStepBindings, type StepOutcome } from './steps';
import { statusGuard, statusGuardBound } from './status-guard';

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
 * Settlement (docs/architecture.md#the-paths-that-must-never-lose-money-or-work) in one statement, so one transaction: the fenced
 * terminal status, the charge (never above the reservation), the release of the rest to
 * the available balance, this month's cap counter, the usage counter and the journal.
 * Returns null when the fence did not match: someone else already moved the execution.
 */
/**
 * Settlement's CTEs (e: the fenced terminal status and charge; p: the balance row; u: the usage
 * counter; l: the journal) and the statement's result. `fence` adds conditions on the
 * execution row (the lease, the step end of finishLastStepAndSettle).
 */
function settleSql(fence: string): string {
  return `e AS (
       UPDATE executions
          SET status = :status, charged_micros = LEAST(:chargedMicros::bigint, reserved_micros), output = :output::jsonb,
              error_code = :errorCode, error_message = :errorMessage, cancel_requested = cancel_requested OR :cancelRequested::boolean,
              finished_at = tes_now(), settled_at = tes_now(), updated_at = now(),
              lease_owner = NULL, lease_expires_at = NULL
        WHERE id = :executionId AND project_id = :projectId AND ${statusGuardBound('status', ':from')} ${fence}
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
       SELECT :transactionId, e.project_id, e.id, :kind, v.account, v.amount
         FROM e CROSS JOIN LATERAL (VALUES
           ('reserved', -e.reserved_micros),
           ('available', e.reserved_micros - e.charged_micros),
           ('charged', e.charged_micros)) AS v(account, amount)
       RETURNING 1
     )
     SELECT e.id, e.tool, e.reserved_micros, e.charged_micros, e.created_at FROM e`;
}

interface SettleRow {
  id: string;
  tool: string;
  reserved_micros: number;
  charged_micros: number;
  created_at: Date;
}

function settleBindings(input: SettleInput): Knex.ValueDict {
  if (!Number.isSafeInteger(input.chargedMicros) || input.chargedMicros < 0) throw new Error('charge must be a whole number of micros');
  return {
    status: input.status,
    chargedMicros: input.chargedMicros,
    output: input.output === undefined || input.output === null ? null : JSON.stringify(input.output),
    errorCode: input.errorCode ?? null,
    errorMessage: input.errorMessage ?? null,
    cancelRequested: input.cancelRequested ?? false,
    executionId: input.executionId,
    projectId: input.projectId,
    from: input.from,
    ...(input.leaseOwner !== undefined ? { leaseOwner: input.leaseOwner } : {}),
    transactionId: newId('txn'),
    kind: input.kind ?? 'settle',
  };
}

const toSettleResult = (row: SettleRow | undefined): SettleResult | null =>
  row ? { id: row.id, tool: row.tool, reservedMicros: row.reserved_micros, chargedMicros: row.charged_micros, createdAt: iso(row.created_at)! } : null;

/**
 * Settlement (docs/architecture.md#the-paths-that-must-never-lose-money-or-work) in one statement, so one transaction: the fenced
 * terminal status, the charge (never above the reservation), the release of the rest to
 * the available balance, this month's cap counter, the usage counter and the journal.
 * Returns null when the fence did not match: someone else already moved the execution.
 */
export async function settleExecution(db: Knex, input: SettleInput): Promise<SettleResult | null> {
  const bindings = settleBindings(input);
  // Two prepared texts: with and without the lease fence (a text per plan).
  const leaseFence = input.leaseOwner !== undefined ? 'AND lease_owner = :leaseOwner' : '';
  const res = await prepared<{ rows: SettleRow[] }>(db, leaseFence ? 'tes_settle_fenced' : 'tes_settle', `WITH ${settleSql(leaseFence)}`, bindings);
  return toSettleResult(res.rows[0]);
}

/**
 * An execution's last step ends and the execution is settled, in ONE statement (one round trip,
 * one commit instead of finishStep's and settleExecution's two): the fenced step update and its
 * artifact rows, then the settlement, fenced by the same lease and only if the step update
 * matched. All or nothing: null means neither was written (the lease was lost, or the step was
 * not running), and the caller's stored objects are named by no row. The charge is computed by
 * the caller from its steps including this one, as for settleExecution.
 */
export async function finishLastStepAndSettle(db: Knex, step: StepOutcome, settle: SettleInput & { leaseOwner: string }): Promise<SettleResult | null> {
  if (step.executionId !== settle.executionId || step.owner !== settle.leaseOwner)
    throw new Error('the step and the settlement must be of one execution and one lease');
  const res = await prepared<{ rows: SettleRow[] }>(
    db,
    'tes_finish_last_step_settle',
    `WITH ${FINISH_STEP_CTES}, ${settleSql('AND lease_owner = :leaseOwner AND EXISTS (SELECT 1 FROM s)')}`,
    { ...finishStepBindings(step), ...settleBindings(settle) },
  );
  return toSettleResult(res.rows[0]);
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
  const res = await db.raw<{ rows: ExecutionRow[] }>(
    `UPDATE executions SET cancel_requested = true, updated_at = now()
      WHERE id = :id AND project_id = :projectId AND ${statusGuard('status', ['running', 'waiting'])}
      RETURNING ${EXECUTION_SELECT}`,
    { id: execution.id, projectId },
  );
  if (res.rows[0]) return { kind: 'requested', execution: toExecution(res.rows[0]) };
  const current = (await getExecution(db, projectId, execution.id))!;
  if (current.status === 'cancelled') return { kind: 'unchanged', execution: current };
  if (current.status === 'queued') return cancelExecution(db, projectId, current);
  return { kind: 'not_cancellable', execution: current };
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
export async function abandonExecution(db: Knex, input: { executionId: string; errorCode: string; errorMessage: string }): Promise<AbandonOutcome> {
  return db.transaction(async (trx) => {
    const locked = await trx.raw<{ rows: { id: string; project_id: string; reserved_micros: number }[] }>(
      `SELECT id, project_id, reserved_micros FROM executions
        WHERE id = :executionId AND ${statusGuard('status', ['queued', 'running'])}
          AND (lease_owner IS NULL OR lease_expires_at < tes_now())
        FOR UPDATE`,
      { executionId: input.executionId },
    );
    const e = locked.rows[0];
    if (!e) return 'not_abandoned';
    const steps = await trx<{ execution_id: string; status: string; external: boolean; cost_micros: number }>('execution_steps')
      .select('status', 'external', 'cost_micros')
      .where({ execution_id: e.id });
    const unknownExternal = steps.some((s) => s.status === 'running' && s.external);
    if (unknownExternal) {
      await trx('executions')
        .where({ id: e.id })
        .update({
          status: 'needs_review',
          error_code: input.errorCode,
          error_message: `${input.errorMessage}; a provider step's outcome is unknown`,
          lease_owner: null,
          lease_expires_at: null,
          updated_at: trx.fn.now(),
        });
      return 'needs_review';
    }
    const cost = steps.filter((s) => s.status === 'succeeded').reduce((sum, s) => sum + s.cost_micros, 0);
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
