import type { ExecutionRecord, StepRecord } from './records';

/**
 * The public execution object of api-contract.md, as GET answers it, as its event stream sends it
 * and as its webhooks carry it. Never file bytes, never a URL.
 */
export function publicExecution(e: ExecutionRecord, steps: StepRecord[]): Record<string, unknown> {
  const own = steps.filter((s) => s.executionId === e.id).sort((a, b) => a.index - b.index);
  const running = own.find((s) => s.status === 'running');
  return {
    id: e.id,
    tool: e.tool,
    model: e.model,
    status: e.status,
    arguments: e.arguments,
    priceVersion: e.priceVersion,
    reservedMicros: e.reservedMicros,
    chargedMicros: e.chargedMicros,
    currency: 'usd',
    cancelRequested: e.cancelRequested,
    progress: {
      completedSteps: own.filter((s) => s.status === 'succeeded').length,
      totalSteps: e.totalSteps,
      currentStep: e.status === 'running' || e.status === 'waiting' ? (running?.name ?? null) : null,
    },
    steps: own.map((s) => ({
      index: s.index,
      name: s.name,
      status: s.status,
      costMicros: s.costMicros,
      startedAt: s.startedAt,
      finishedAt: s.finishedAt,
    })),
    output: e.output,
    errorCode: e.errorCode,
    errorMessage: e.errorMessage,
    createdAt: e.createdAt,
    startedAt: e.startedAt,
    finishedAt: e.finishedAt,
  };
}
