import { finishLastStepAndSettle, markNeedsReview, settleExecution, type ClaimedExecution, type SettleInput, type StepOutcome, type StepRecord } from '@tes/db';
import { withSpan } from '@tes/tracing';
import { LeaseLost, type ExecutionDeps } from './context';

type SettleDeps = Pick<ExecutionDeps, 'db' | 'logger' | 'metrics'>;

/**
 * Ends the execution (fenced by the claim's lease) and charges the sum of its succeeded
 * steps' costs. The sum is within the reservation because each billed step was capped at what
 * remained of it when it ran (runStep); settleExecution's LEAST(charged, reserved) backs that.
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
    return lastStep ? finishLastStepAndSettle(db, lastStep, input) : settleExecution(db, input);
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

/** A provider step's outcome is unknown: the execution waits for an operator, its reservation held. */
export async function needsReview(deps: SettleDeps, e: ClaimedExecution, index: number, message: string): Promise<void> {
  if (!(await markNeedsReview(deps.db, { executionId: e.id, owner: e.lease, errorCode: 'provider_outcome_unknown', errorMessage: message }))) {
    throw new LeaseLost();
  }
  deps.metrics.executionsTotal.inc({ tool: e.tool, status: 'needs_review' });
  deps.logger.warn('worker.execution.needs_review', { executionId: e.id, projectId: e.projectId, tool: e.tool, step: index });
}

/** What the execution's succeeded steps cost together. */
export function chargedSoFar(steps: StepRecord[]): number {
  return steps.filter((s) => s.status === 'succeeded').reduce((sum, s) => sum + s.costMicros, 0);
}
