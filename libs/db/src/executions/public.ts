import type { PublicExecution } from '@tes/core';
import type { ExecutionRecord, QueuePlace, StepRecord } from './records';

/** The fields of an execution the public object shows (a webhook's snapshot holds just these). */
export type PublicExecutionFields = Pick<
  ExecutionRecord,
  | 'id'
  | 'tool'
  | 'model'
  | 'status'
  | 'arguments'
  | 'priceVersion'
  | 'totalSteps'
  | 'reservedMicros'
  | 'chargedMicros'
  | 'cancelRequested'
  | 'output'
  | 'errorCode'
  | 'errorMessage'
  | 'createdAt'
  | 'startedAt'
  | 'finishedAt'
>;
export type PublicStepFields = Pick<StepRecord, 'executionId' | 'index' | 'name' | 'status' | 'costMicros' | 'startedAt' | 'finishedAt'>;

/**
 * The public execution object (docs/api.md#the-execution; typed by libs/core's PublicExecution), as GET answers it, as its event stream sends it
 * and as its webhooks carry it. Never file bytes, never a URL. `place`, read by queuePlaces() for
 * a queued execution, adds progress.queuePosition and progress.estimatedStartAt; they are shown
 * only while the execution is queued (a place read just before a claim is dropped).
 */
export function publicExecution(e: PublicExecutionFields, steps: readonly PublicStepFields[], place?: QueuePlace | null): PublicExecution {
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
      ...(e.status === 'queued' && place ? { queuePosition: place.queuePosition, estimatedStartAt: place.estimatedStartAt } : {}),
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
