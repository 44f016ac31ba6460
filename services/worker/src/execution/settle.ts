import { backoffDelayMs, sleep } from '@tes/core';
import {
  finishLastStepAndSettle,
  isRolledBackError,
  markNeedsReview,
  settleExecution,
  type ClaimedExecution,
  type SettleInput,
  type StepOutcome,
  type StepRecord,
} from '@tes/db';
import { withSpan } from '@tes/tracing';
import { LeaseLost, type ExecutionDeps } from './context';

type SettleDeps = Pick<ExecutionDeps, 'db' | 'logger' | 'metrics'>;

/** Tries of a settlement statement that a deadlock or serialization failure rolled back. */
const SETTLE_TRIES = 4;

/**
 * Ends the execution (fenced by the claim's lease) and charges the sum of its steps' costs
 * (chargedSoFar). The sum is within the reservation because each step's cost, a timed-out
 * step's too, was capped at what remained of it when it ran (runStep); settleExecution's
 * LEAST(charged, reserved) backs that.
 *
 * The settlement is one statement, so a deadlock (40P01), a serialization failure (40001) or a
 * lock or statement timeout (55P03, 57014: the worker's DB_*_TIMEOUT_MS) rolled all of it back: it is sent again in place, up to SETTLE_TRIES times, a few ms apart (the other
 * side of a deadlock, e.g. a submit holding the balance row, commits in that time). Spending the
 * attempt instead would throw the step's work and artifacts away for a lock-order accident. Past
 * the tries the error is thrown on, and the caller gives the execution back (no attempt spent).
 */
export async function settle(
  deps: SettleDeps,
  e: ClaimedExecution,
  status: 'succeeded' | 'failed' | 'cancelled',
  steps: StepRecord[],
  extra: { output?: Record<string, unknown>; errorCode?: string; errorMessage?: string },
  /** The last step's end, recorded in the settlement's statement (`steps` already include it). */
  lastStep?: StepOutcome,
): Promise<'ended'> {
  const { db, logger, metrics } = deps;
  const timer = metrics.settlementDuration.startTimer();
  const input: SettleInput & { leaseOwner: string } = {
    executionId: e.id,
    projectId: e.projectId,
    status,
    chargedMicros: chargedSoFar(steps),
    from: ['running'],
    leaseOwner: e.lease,
    output: extra.output ?? null,
    errorCode: extra.errorCode ?? null,
    errorMessage: extra.errorMessage ?? null,
  };
  const settled = await withSpan('execution.settle', (span) => {
    span.setAttributes({ 'tes.execution.status': status, 'tes.charged_micros': input.chargedMicros });
    return retryRolledBack(deps, e.id, () => (lastStep ? finishLastStepAndSettle(db, lastStep, input) : settleExecution(db, input)));
  });
  timer({ outcome: settled ? status : 'fenced' });
  if (!settled) throw new LeaseLost();
  metrics.executionsTotal.inc({ tool: e.tool, status });
  metrics.settledMicros.inc({ tool: e.tool }, settled.chargedMicros);
  if (status === 'failed') metrics.executionFailures.inc({ tool: e.tool, error_code: extra.errorCode ?? 'unknown' });
  metrics.executionDuration.observe({ tool: e.tool, outcome: status }, (Date.now() - Date.parse(e.createdAt)) / 1000);
  logger.info('worker.execution.settled', {
    executionId: e.id,
    projectId: e.projectId,
    tool: e.tool,
    status,
    chargedMicros: settled.chargedMicros,
    reservedMicros: settled.reservedMicros,
  });
  return 'ended';
}

/** Runs `statement` again, a bounded number of times, while it fails rolled back (isRolledBackError). */
export async function retryRolledBack<T>(deps: SettleDeps, executionId: string, statement: () => Promise<T>): Promise<T> {
  for (let tried = 1; ; tried++) {
    try {
      return await statement();
    } catch (err) {
      if (!isRolledBackError(err) || tried >= SETTLE_TRIES) throw err;
      deps.logger.warn('worker.settle.retried', { executionId, tried, code: (err as { code?: string }).code });
      await sleep(backoffDelayMs(tried, { firstMs: 20, maxMs: 500, jitter: 'full' }));
    }
  }
}

/** A provider step's outcome is unknown: the execution waits for an operator, its reservation held. */
export async function needsReview(deps: SettleDeps, e: ClaimedExecution, index: number, message: string): Promise<void> {
  if (!(await markNeedsReview(deps.db, { executionId: e.id, owner: e.lease, errorCode: 'provider_outcome_unknown', errorMessage: message }))) {
    throw new LeaseLost();
  }
  deps.metrics.executionsTotal.inc({ tool: e.tool, status: 'needs_review' });
  deps.logger.warn('worker.execution.needs_review', { executionId: e.id, projectId: e.projectId, tool: e.tool, step: index });
}

/**
 * What the execution's steps cost together: the succeeded ones, and a failed one's cost (only
 * a step that ran out of its deadline on its own work has one: StepTimedOut).
 */
export function chargedSoFar(steps: StepRecord[]): number {
  return steps.filter((s) => s.status === 'succeeded' || s.status === 'failed').reduce((sum, s) => sum + s.costMicros, 0);
}
