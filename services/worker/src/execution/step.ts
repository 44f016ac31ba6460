import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { DEFAULT_STEP_TIMEOUT_MS, type PriceList, type StepPlan, type ToolDefinition } from '@tes/catalog';
import { StepError } from '@tes/core';
import {
  databaseTime,
  getExecutionInputFile,
  recordExternalRef,
  recordStepUnsent,
  type ClaimedExecution,
  type ExecutionRecord,
  type StepRecord,
} from '@tes/db';
import { annotate } from '@tes/tracing';
import { OutcomeUnknown } from '../outcome-unknown';
import { isWait, type AnyRunner, type InputFile, type StepFn, type StepResult, type StepWait } from '../runner';
import { LeaseLost, ShuttingDown, type ExecutionDeps } from './context';
import { chargedSoFar } from './settle';
import type { WorkDir } from './work-dir';

/** One step to run, with what it needs to know about its execution. */
export interface StepRun {
  /** The claimed execution; its `lease` fences this step's writes. */
  execution: ClaimedExecution;
  tool: ToolDefinition;
  runner: AnyRunner;
  index: number;
  step: StepPlan;
  /** Steps recorded so far: earlier steps' checkpoints, and what the execution has cost. */
  previous: StepRecord[];
  /** The execution's price list (its price version's). */
  prices: PriceList;
  workDir: WorkDir;
  /** This step's record when a waiting provider step is re-checked, else undefined. */
  resumed: StepRecord | undefined;
  /** The execution's LeaseKeeper signal: aborted (with LeaseLost) when the lease is lost. */
  lease: AbortSignal;
}

/**
 * A step that ran out of its deadline on its own work: it fails with `step_timeout` and costs
 * `costMicros`, the deadline it held priced by the catalog (Catalog.timeoutCost) and capped at
 * what remains of the reservation. Every other failure, and a timeout that was not the work's
 * (a provider's wait, our storage or database), is a plain StepError and costs nothing.
 */
export class StepTimedOut extends StepError {
  constructor(
    message: string,
    readonly costMicros: number,
  ) {
    super('step_timeout', message);
    this.name = 'StepTimedOut';
  }
}

/** A step's result as recorded: the runner's units (and its provider's usage) priced into the step's cost. */
export type PricedResult = Omit<StepResult, 'units' | 'usage'> & { costMicros: number };

/**
 * Runs one step under its deadline (losing the lease or a shutdown aborts it, with that as the
 * reason), and prices what it reports, or the deadline it ran out of (StepTimedOut). The lease is kept alive by the execution's LeaseKeeper,
 * which outlives the step: its artifacts' upload and the statement recording its end follow.
 */
export async function runStep(deps: ExecutionDeps, run: StepRun): Promise<PricedResult | StepWait> {
  const { db } = deps;
  const { execution: e, index, step, workDir, resumed, lease } = run;
  const name = step.label ?? step.name;
  const timeoutMs = step.timeoutMs ?? DEFAULT_STEP_TIMEOUT_MS;
  const controller = new AbortController();
  const onShutdown = () => controller.abort(new ShuttingDown());
  const onLeaseLost = () => controller.abort(lease.reason);
  deps.shutdown.addEventListener('abort', onShutdown, { once: true });
  lease.addEventListener('abort', onLeaseLost, { once: true });
  // a listener added to an aborted signal never runs: a shutdown or a loss that came first counts too
  if (deps.shutdown.aborted) onShutdown();
  else if (lease.aborted) onLeaseLost();
  // A provider reference this step has (recorded now or on an earlier run): past it, the
  // provider has the job, may finish it and bill for it.
  let providerRef = resumed?.externalRef ?? null;
  // Calls into our own infrastructure in flight (an input's download, the database): a deadline
  // that runs out during one is ours to bear, not the input's.
  let ours = 0;
  const onOurSide = async <T>(call: () => Promise<T>): Promise<T> => {
    ours += 1;
    try {
      return await call();
    } finally {
      ours -= 1;
    }
  };
  // Set when the deadline ran out on the step's own work: that timeout is charged (StepTimedOut).
  let chargedTimeout = null as StepError | null; // (assigned in the timer: not narrowed to null)
  const deadline = setTimeout(() => {
    if (providerRef !== null) {
      // not a zero-charge failure: the job may have run and cost money; an operator decides
      controller.abort(new OutcomeUnknown(`step ${name} exceeded ${timeoutMs} ms after its provider job ${providerRef} was created; its outcome is unknown`));
      return;
    }
    const timeout = new StepError('step_timeout', `step ${name} exceeded ${timeoutMs} ms`);
    // Charged only when the work's own time ran out: not an external step's (it waited on its
    // provider, whose outage is no fault of the input), not during a call of ours, and not once
    // a shutdown or a lost lease had aborted the step first (it is given back, not failed).
    if (!controller.signal.aborted && step.external !== true && ours === 0) chargedTimeout = timeout;
    controller.abort(timeout);
  }, timeoutMs);
  try {
    const fn = run.runner[step.name];
    if (!fn) throw new StepError('internal_error', `${e.tool} has no step ${step.name}`);
    // The one place the arguments' type is taken on trust: the catalog checked them against
    // this tool's schema at submit, and they are stored as checked.
    const result = await (fn as StepFn<Record<string, unknown>>)(
      {
        logFields: { executionId: e.id, projectId: e.projectId, tool: e.tool },
        index,
        signal: controller.signal,
        previous: run.previous,
        externalRef: resumed?.externalRef ?? null,
        stepCheckpoint: resumed?.checkpoint ?? null,
        recordExternalRef: async (ref, checkpoint) => {
          const recorded = await onOurSide(() =>
            recordExternalRef(db, { executionId: e.id, index, owner: e.lease, externalRef: ref, checkpoint: checkpoint ?? null }),
          );
          if (!recorded) throw new LeaseLost();
          providerRef = ref;
        },
        recordUnsent: async (checkpoint) => {
          const recorded = await onOurSide(() => recordStepUnsent(db, { executionId: e.id, index, owner: e.lease, checkpoint }));
          if (!recorded) throw new LeaseLost();
        },
        databaseNow: async () => (await onOurSide(() => databaseTime(db))).getTime(),
        get workDir() {
          return workDir.path;
        },
        inputFile: (fileId) => onOurSide(() => fetchInput(deps, e, fileId, workDir.path, controller.signal)),
        logger: deps.logger,
        providers: deps.providers,
        sandbox: deps.sandbox,
      },
      e.arguments,
    );
    if (controller.signal.aborted) throw controller.signal.reason;
    return isWait(result) ? result : price(deps, run, name, result);
  } catch (err) {
    if (!controller.signal.aborted) throw err;
    const reason: unknown = controller.signal.reason;
    throw reason === chargedTimeout && chargedTimeout !== null ? timedOut(deps, run, name, timeoutMs, chargedTimeout.message) : reason;
  } finally {
    clearTimeout(deadline);
    deps.shutdown.removeEventListener('abort', onShutdown);
    lease.removeEventListener('abort', onLeaseLost);
  }
}

/**
 * The step's cost: 0 for a free step; for a billed one, the catalog's price of its units under
 * the execution's price version, capped at what remains of the reservation. That is the one
 * cap: the execution is charged the sum of its steps' costs.
 */
function price(deps: ExecutionDeps, run: StepRun, name: string, result: StepResult): PricedResult {
  const { units, usage, ...rest } = result;
  if (!Number.isSafeInteger(units) || units < 0) throw new Error(`step ${name} reported an invalid number of units`);
  if (!run.step.billed) {
    if (units !== 0) throw new Error(`step ${name} is free but reported ${units} units`);
    annotate({ 'tes.step.units': 0, 'tes.step.cost_micros': 0 });
    return { ...rest, costMicros: 0 };
  }
  const e = run.execution;
  // priced from the provider's own report where it made one, so the charge follows its bill
  const cost = deps.catalog.cost(run.tool, e.model, units, run.prices, e.arguments, usage);
  const costMicros = Math.min(cost, Math.max(0, e.reservedMicros - chargedSoFar(run.previous)));
  if (costMicros < cost) {
    // the customer is never charged past the reservation; the difference is revenue the quote missed
    deps.metrics.cappedMicros.inc({ tool: e.tool }, cost - costMicros);
    deps.logger.warn('worker.step.cost_capped', { executionId: e.id, tool: e.tool, step: name, units, usage, costMicros: cost, chargedMicros: costMicros });
  }
  annotate({ 'tes.step.units': units, 'tes.step.cost_micros': costMicros });
  return { ...rest, costMicros };
}

/**
 * The step ran out of its deadline on its own work: what the deadline it held costs (the
 * catalog's timeout price under the execution's price version), capped like any step's cost at
 * what remains of the reservation, so the charge never passes the quoted maximum.
 */
function timedOut(deps: ExecutionDeps, run: StepRun, name: string, timeoutMs: number, message: string): StepTimedOut {
  const e = run.execution;
  const cost = deps.catalog.timeoutCost(run.tool, e.model, timeoutMs, run.prices);
  const costMicros = Math.min(cost, Math.max(0, e.reservedMicros - chargedSoFar(run.previous)));
  annotate({ 'tes.step.units': 0, 'tes.step.cost_micros': costMicros });
  deps.logger.info('worker.step.timeout_charged', { executionId: e.id, tool: e.tool, step: name, timeoutMs, costMicros: cost, chargedMicros: costMicros });
  return new StepTimedOut(message, costMicros);
}

async function fetchInput(deps: ExecutionDeps, e: ExecutionRecord, fileId: string, workDir: string, signal: AbortSignal): Promise<InputFile> {
  // Scoped to the execution's project: a file id of another project does not resolve.
  const file = await getExecutionInputFile(deps.db, e.projectId, e.id, fileId);
  if (!file) throw new StepError('invalid_input_file', `input file ${fileId} is no longer available`);
  const bytes = await deps.store.get(file.storageKey, signal);
  const target = path.join(workDir, `${file.id}.${file.format}`);
  await writeFile(target, bytes);
  return { path: target, format: file.format, sizeBytes: bytes.length };
}
