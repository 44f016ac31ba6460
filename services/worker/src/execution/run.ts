import { MAX_STEPS, StepError } from '@tes/core';
import { crashPoint } from '@tes/lifecycle';
import {
  enterWaiting,
  finishStep,
  getSteps,
  isConnectionError,
  isRolledBackError,
  isUnsentStep,
  startStep,
  type ClaimedExecution,
  type StepRecord,
} from '@tes/db';
import { withSpan } from '@tes/tracing';
import { hasProgram } from '../programs';
import { OutcomeUnknown } from '../outcome-unknown';
import { isWait, type StepWait } from '../runner';
import { discardArtifacts, executionOutput, storeFiles, summary } from './artifacts';
import { LeaseLost, ShuttingDown, type ExecutionDeps } from './context';
import { needsReview, retryRolledBack, settle } from './settle';
import { runStep, StepTimedOut, type PricedResult } from './step';
import type { WorkDir } from './work-dir';

/**
 * Runs a claimed execution's remaining steps in order, recording each before and after it
 * runs, and settles it; 'waiting' when a provider step waits for its job (the caller has it
 * come back). Stops before a new step when cancellation was requested. Throws LeaseLost when
 * fenced out or when `lease` (the execution's LeaseKeeper signal, renewing from the claim to the
 * end) aborted; ShuttingDown, a connection error or a deadlock or serialization failure that
 * outlasted the settlement's retries when the execution must be given back. Every write is
 * fenced by the claim's lease (`e.lease`), never by the worker's id alone.
 */
export async function runExecution(deps: ExecutionDeps, e: ClaimedExecution, workDir: WorkDir, lease: AbortSignal): Promise<'ended' | 'waiting'> {
  const { db, catalog, logger } = deps;
  const log = { executionId: e.id, projectId: e.projectId, tool: e.tool };
  const tool = catalog.get(e.tool);
  const runner = deps.runners[e.tool];
  const prices = await deps.prices(e.priceVersion);
  if (!tool || !runner) {
    await settle(deps, e, 'failed', [], { errorCode: 'internal_error', errorMessage: `this worker cannot run ${e.tool}` });
    return 'ended';
  }
  const missing = (tool.models.find((m) => m.id === e.model)?.requires ?? []).filter((p) => !hasProgram(p));
  if (missing.length > 0) {
    // Nothing ran, nothing is charged; the catalog shows the model unavailable once a
    // worker without the programs has reported at start.
    await settle(deps, e, 'failed', [], { errorCode: 'tool_unavailable', errorMessage: `this worker lacks ${missing.join(', ')}` });
    return 'ended';
  }
  const plan = tool.plan(e.arguments);
  // Read once; afterwards kept up to date here with what this worker itself records (the
  // lease fences out every other writer), saving a read per step.
  let steps = e.stepsRecorded ? await getSteps(db, e.projectId, [e.id]) : [];

  for (let index = 0; index < plan.length; index++) {
    const step = plan[index]!;
    const name = step.label ?? step.name;
    if (lease.aborted) throw lease.reason; // no step starts on a lease this worker cannot vouch for
    const recorded = steps.find((s) => s.index === index);
    if (recorded?.status === 'succeeded') continue;
    // The worker is draining: the step before this one was let finish; this one is left to the
    // worker that resumes the execution (started here, the drain's abort could cut it short).
    if (deps.draining.aborted) throw new ShuttingDown();
    if (index >= MAX_STEPS) {
      await settle(deps, e, 'failed', steps, { errorCode: 'step_limit_exceeded', errorMessage: `an execution runs at most ${MAX_STEPS} steps` });
      return 'ended';
    }
    const resuming = recorded?.status === 'running' && step.external === true;
    if (resuming && !recorded.externalRef && !isUnsentStep(recorded)) {
      // Started with an external provider and no reference was recorded: the request may
      // have run and cost money. Never send it again; an operator decides. (Unless the step
      // recorded that the provider refused it and took nothing: it waits to send it again.)
      await needsReview(deps, e, index, `step ${index} (${name}) was sent to a provider and its outcome is unknown after a crash`);
      return 'ended';
    }
    if (!resuming) {
      // A new step (a re-check of a waiting provider step is not one). Its start is fenced
      // by the lease and by cancellation in one statement, so a cancel answered before it
      // stops the execution here, whenever it landed.
      crashPoint('worker.before_step');
      const started = await startStep(db, { executionId: e.id, projectId: e.projectId, index, name, owner: e.lease, external: step.external ?? false });
      if (started === 'lease_lost') throw new LeaseLost();
      if (started === 'cancel_requested') {
        await settle(deps, e, 'cancelled', steps, {});
        return 'ended';
      }
    }

    let result: PricedResult | StepWait;
    try {
      // the span's units and cost are added by runStep once priced
      result = await withSpan('execution.step', (span) => {
        span.setAttributes({ 'tes.tool': e.tool, 'tes.model': e.model, 'tes.step.index': index, 'tes.step.name': name });
        return runStep(deps, { execution: e, tool, runner, index, step, previous: steps, prices, workDir, resumed: resuming ? recorded : undefined, lease });
      });
    } catch (err) {
      // A statement of the step's own (recordExternalRef, the database's clock) that a lock or
      // statement timeout or a deadlock rolled back is no failure of the step: a provider job it
      // created may be running. The engine gives the execution back; the next claim resumes the
      // job by its reference, or hands a step without one to an operator.
      if (err instanceof LeaseLost || err instanceof ShuttingDown || isConnectionError(err) || isRolledBackError(err)) throw err;
      if (err instanceof OutcomeUnknown) {
        await needsReview(deps, e, index, err.message);
        return 'ended';
      }
      const failure = err instanceof StepError ? err : null;
      if (!failure) logger.error('worker.step.crashed', { ...log, step: index, err });
      const errorCode = failure?.errorCode ?? 'internal_error';
      // A failed step is free, except one that ran out of its deadline on its own work.
      const costMicros = err instanceof StepTimedOut ? err.costMicros : 0;
      steps = recordLocally(steps, e.id, index, name, { status: 'failed', costMicros, checkpoint: null, errorCode });
      // The step's end and the settlement in one statement: a step recorded with a cost is never
      // left for a reaper that charges only succeeded steps (abandonExecution).
      const outcome = { executionId: e.id, projectId: e.projectId, index, owner: e.lease, status: 'failed' as const, costMicros, errorCode };
      await settle(deps, e, 'failed', steps, { errorCode, errorMessage: failure?.message ?? 'the step failed unexpectedly' }, outcome);
      logger.info('worker.step.failed', { ...log, step: index, errorCode, costMicros });
      return 'ended';
    }

    if (isWait(result)) {
      // Frees the consumer slot; the caller has the execution come back for a re-check.
      if (!(await enterWaiting(db, { executionId: e.id, owner: e.lease, recheckDeadlineMs: deps.recheckDeadlineMs }))) throw new LeaseLost();
      logger.info('worker.step.waiting', { ...log, step: index, name });
      return 'waiting';
    }
    // The lease is still renewed here and through the statement that records the step's end:
    // an upload that outlasts the TTL must not hand the execution to another attempt.
    const artifacts = await storeFiles(deps, e, index, result.files ?? [], AbortSignal.any([lease, deps.shutdown]));
    const checkpoint = { ...(result.checkpoint ?? {}), artifacts: artifacts.map(summary), facts: result.facts ?? {} };
    const outcome = {
      executionId: e.id,
      projectId: e.projectId,
      index,
      owner: e.lease,
      status: 'succeeded' as const,
      costMicros: result.costMicros,
      checkpoint,
      artifacts,
    };
    const after = recordLocally(steps, e.id, index, name, { status: 'succeeded', costMicros: result.costMicros, checkpoint, errorCode: null });
    if (index === plan.length - 1) {
      // The last step: its end and the settlement in one statement (one round trip and one
      // commit, all or nothing). Fenced out, or rolled back (a deadlock or serialization failure
      // its retries did not get past, a statement or lock timeout), nothing was written and no row names the objects.
      // (A connection error may have come after the commit: then the objects are kept.)
      const settled = await settle(deps, e, 'succeeded', after, { output: executionOutput(after) }, outcome).catch(async (err: unknown) => {
        if (err instanceof LeaseLost || isRolledBackError(err)) await discardArtifacts(deps, artifacts);
        throw err;
      });
      logger.info('worker.step.succeeded', { ...log, step: index, name, costMicros: result.costMicros });
      return settled;
    }
    const finished = await retryRolledBack(deps, e.id, () => finishStep(db, outcome)).catch(async (err: unknown) => {
      // rolled back for certain: nothing names the objects (other errors may follow a commit: kept)
      if (isRolledBackError(err)) await discardArtifacts(deps, artifacts);
      throw err;
    });
    if (!finished) {
      // Fenced out: no row will ever name these objects, so they would stay in the bucket forever.
      await discardArtifacts(deps, artifacts);
      throw new LeaseLost();
    }
    logger.info('worker.step.succeeded', { ...log, step: index, name, costMicros: result.costMicros });
    steps = after;
  }

  // every step had succeeded before this claim (a crash after the last step's end, before an
  // older worker's separate settlement)
  await settle(deps, e, 'succeeded', steps, { output: executionOutput(steps) });
  return 'ended';
}

/** The step list after this worker recorded a step's outcome (what the database now holds). */
function recordLocally(
  steps: StepRecord[],
  executionId: string,
  index: number,
  name: string,
  outcome: Pick<StepRecord, 'status' | 'costMicros' | 'checkpoint' | 'errorCode'>,
): StepRecord[] {
  const now = new Date().toISOString();
  const before = steps.find((s) => s.index === index);
  const updated: StepRecord = {
    executionId,
    index,
    name,
    externalRef: before?.externalRef ?? null,
    attempts: before?.attempts ?? 1,
    startedAt: before?.startedAt ?? now,
    finishedAt: now,
    ...outcome,
  };
  return [...steps.filter((s) => s.index !== index), updated].sort((a, b) => a.index - b.index);
}
