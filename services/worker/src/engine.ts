import { randomUUID } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Knex } from 'knex';
import type { Catalog, PriceList } from '@tes/catalog';
import { isAppError, MAX_STEPS, newId, RETENTION_MS, sha256Hex, StepError } from '@tes/core';
import {
  claimExecution,
  getSteps,
  finishStep,
  getPriceVersion,
  getExecutionInputFile,
  isConnectionError,
  markNeedsReview,
  enterWaiting,
  recordExternalRef,
  releaseLease,
  renewLease,
  settleExecution,
  startStep,
  parseExecutionMessage,
  type ArtifactSummary,
  type ExecutionMessage,
  type ExecutionRecord,
  type NewArtifact,
  type StepRecord,
} from '@tes/db';
import type { Delivery, Disposition } from '@tes/messaging';
import { crashPoint } from '@tes/lifecycle';
import type { Logger, Metrics } from '@tes/observability';
import { artifactKey, type ObjectStore } from '@tes/storage';
import { hasProgram } from './programs';
import { SharpSandbox } from './media/sharp-sandbox';
import type { ProviderSetup } from './providers/common';
import { isWait, OutcomeUnknown, type InputFile, type StepOutcome, type StepResult, type ToolRunner } from './runner';

const DEFAULT_STEP_TIMEOUT_MS = 10 * 60 * 1000;

export interface EngineDeps {
  db: Knex;
  catalog: Pick<Catalog, 'get' | 'charge'>;
  store: ObjectStore;
  runners: Readonly<Record<string, ToolRunner>>;
  logger: Logger;
  metrics: Metrics;
  leaseTtlMs: number;
  /** Unique per process: the lease owner written on claimed executions. */
  workerId: string;
  /** The delay queues' delay: how soon a message sent by `publishLater` comes back. */
  waitMs: number;
  providers: ProviderSetup;
  /** After this long running, a claimed execution's message is acked (default 5 min; see handleClaimed). */
  earlyAckAfterMs?: number;
  /** Killable sharp; a private one is made when none is given. */
  sandbox?: SharpSandbox;
  /**
   * Publishes a fresh message for an execution to `category`'s delay queue (confirmed): the one
   * way the engine has an execution come back later.
   */
  publishLater: (message: ExecutionMessage, category: string) => Promise<void>;
}

class LeaseLost extends Error {
  constructor() {
    super('lease lost');
    this.name = 'LeaseLost';
  }
}
class ShuttingDown extends Error {
  constructor() {
    super('worker shutting down');
    this.name = 'ShuttingDown';
  }
}

/**
 * The step engine (architecture.md, path 2). For one message it claims the execution with a
 * lease, runs the remaining steps in order, records each step before and after it runs,
 * stops before a new step when cancellation was requested, and settles. Every write is
 * fenced by the lease, so a worker that lost its lease (expired, reaped) changes nothing.
 * The message is acked only after the resulting state is durable.
 */
export class StepEngine {
  private readonly shutdown = new AbortController();
  private readonly priceCache = new Map<string, PriceList>();
  readonly sandbox: SharpSandbox;

  constructor(private readonly deps: EngineDeps) {
    this.sandbox = deps.sandbox ?? new SharpSandbox();
  }

  /** Aborts running steps; their executions are released for another worker to resume. */
  abortAll(): void {
    this.shutdown.abort(new ShuttingDown());
  }

  /**
   * Handles one message from `category`'s queue. Whatever happens, the disposition keeps the
   * message's delivery count for what it is meant for, poison messages: work given back
   * because of a shutdown or an infrastructure outage is re-sent as a fresh message through
   * the delay queue (and this one acked), so a database restart or a rolling deploy never
   * spends the delivery limit and dead-letters healthy work.
   */
  async handle(payload: unknown, category: string, delivery?: Delivery): Promise<Disposition> {
    const { logger } = this.deps;
    const message = parseExecutionMessage(payload);
    if (!message) {
      logger.error('worker.message.malformed', {});
      return 'dead';
    }
    const { executionId } = message;
    if (this.shutdown.signal.aborted) return this.later(message, category, 'shutdown');
    try {
      return await this.handleClaimed(executionId, message, category, delivery);
    } catch (err) {
      if (!isConnectionError(err)) throw err;
      logger.warn('worker.execution.deferred', { executionId, reason: 'infrastructure', err: (err as Error).message });
      return this.later(message, category, 'infrastructure');
    }
  }

  /**
   * "Come back later", the engine's one way of it: a fresh message through the category's
   * delay queue, for a re-check of a waiting provider job, work handed back (shutdown, an
   * outage) and messages no slot was free for. Whatever the execution's state, the database
   * holds a deadline for it (lease_expires_at), and past it the reaper publishes a message
   * itself: so this message only makes the execution come back sooner, and losing it (a crash
   * before it was sent, a broker that refused it) costs time, never the execution. A message
   * the broker refused is nack-requeued ('retry'), unless the execution's state was already
   * written (`written`: then its deadline brings it back, and the message is simply acked).
   */
  private async later(message: ExecutionMessage, category: string, reason: string, written = false): Promise<Disposition> {
    try {
      await this.deps.publishLater(message, category);
      return 'ack';
    } catch (err) {
      this.deps.logger.warn('worker.execution.defer_failed', { executionId: message.executionId, reason, err: (err as Error).message });
      return written ? 'ack' : 'retry';
    }
  }

  /**
   * A message that waited too long for a free slot on this worker (every slot runs a long
   * execution): re-sent through the delay queue, so another worker, or this one later, takes it.
   */
  async deferBusy(payload: unknown, category: string): Promise<Disposition> {
    const message = parseExecutionMessage(payload);
    return message ? this.later(message, category, 'busy') : 'dead';
  }

  private async handleClaimed(executionId: string, message: ExecutionMessage, category: string, delivery?: Delivery): Promise<Disposition> {
    const { db, logger, workerId, leaseTtlMs } = this.deps;
    const execution = await claimExecution(db, executionId, workerId, leaseTtlMs);
    if (!execution) {
      // Terminal, waiting for an operator, or held by a live worker: a duplicate or
      // redelivered message. Nothing to do; the lease holder (or the reaper) carries on.
      logger.debug('worker.execution.skip', { executionId });
      return 'ack';
    }
    const log = { executionId, projectId: execution.projectId, tool: execution.tool, attempt: execution.attempts };
    logger.info('worker.execution.claimed', log);
    const workDir = new WorkDir(path.join(os.tmpdir(), `tes-${executionId}-`));
    // Once the claim is durable the database carries the work (the lease, and the reaper when
    // it expires): a message need not stay unacked for the length of an execution, and must
    // not, for RabbitMQ closes a channel whose delivery stays unacked 30 min. It is acked when
    // the execution ends or after `earlyAckAfterMs` (5 min), whichever is first. Not at once:
    // an unacked delivery holds the prefetch credit, so a worker whose slots are busy is sent
    // no more work while idle workers are, which early acks for every message would undo.
    // Work given back later (shutdown, outage) is re-sent by `later`, or by the reaper.
    const earlyAck = delivery ? setTimeout(() => delivery.settle('ack'), this.deps.earlyAckAfterMs ?? 5 * 60_000) : undefined;
    try {
      if ((await this.run(execution, workDir)) === 'waiting') return this.later(message, category, 'waiting', true);
      crashPoint('worker.after_settle');
      return 'ack';
    } catch (err) {
      if (err instanceof LeaseLost) {
        logger.warn('worker.execution.lease_lost', log);
        return 'ack';
      }
      const shuttingDown = err instanceof ShuttingDown || this.shutdown.signal.aborted;
      if (shuttingDown || isConnectionError(err)) {
        // Give the execution back (if the database answers; else its lease simply expires)
        // and have it come back later; the next claim resumes after the last completed step.
        await releaseLease(db, executionId, workerId, this.recheckDeadlineMs()).catch(() => undefined);
        logger.info('worker.execution.released', { ...log, reason: shuttingDown ? 'shutdown' : 'infrastructure' });
        return this.later(message, category, shuttingDown ? 'shutdown' : 'infrastructure');
      }
      throw err;
    } finally {
      clearTimeout(earlyAck);
      await workDir.remove();
    }
  }

  /** Runs the execution's remaining steps; 'waiting' when a provider step waits for its job. */
  private async run(e: ExecutionRecord & { firstClaim: boolean }, workDir: WorkDir): Promise<'ended' | 'waiting'> {
    const { db, catalog, logger, workerId } = this.deps;
    const log = { executionId: e.id, projectId: e.projectId, tool: e.tool };
    const tool = catalog.get(e.tool);
    const runner = this.deps.runners[e.tool];
    const prices = await this.prices(e.priceVersion);
    if (!tool || !runner) {
      await this.settle(e, 'failed', [], { errorCode: 'internal_error', errorMessage: `this worker cannot run ${e.tool}` });
      return 'ended';
    }
    const missing = (tool.models.find((m) => m.id === e.model)?.requires ?? []).filter((p) => !hasProgram(p));
    if (missing.length > 0) {
      // Nothing ran, nothing is charged; the catalog shows the model unavailable once a
      // worker without the programs has reported at start.
      await this.settle(e, 'failed', [], { errorCode: 'tool_unavailable', errorMessage: `this worker lacks ${missing.join(', ')}` });
      return 'ended';
    }
    const plan = tool.plan(e.arguments);
    // Read once; afterwards kept up to date here with what this worker itself records (the
    // lease fences out every other writer), saving a read per step.
    let steps = e.firstClaim ? [] : await getSteps(db, e.projectId, [e.id]);

    for (let index = 0; index < plan.length; index++) {
      const step = plan[index]!;
      const recorded = steps.find((s) => s.index === index);
      if (recorded?.status === 'succeeded') continue;
      if (index >= MAX_STEPS) {
        await this.settle(e, 'failed', steps, { errorCode: 'step_limit_exceeded', errorMessage: `an execution runs at most ${MAX_STEPS} steps` });
        return 'ended';
      }
      const resuming = recorded?.status === 'running' && step.external === true;
      if (resuming && !recorded.externalRef) {
        // Started with an external provider and no reference was recorded: the request may
        // have run and cost money. Never send it again; an operator decides.
        await this.needsReview(e, index, `step ${index} (${step.name}) was sent to a provider and its outcome is unknown after a crash`);
        return 'ended';
      }
      if (!resuming) {
        // A new step (a re-check of a waiting provider step is not one). Its start is fenced
        // by the lease and by cancellation in one statement, so a cancel answered before it
        // stops the execution here, whenever it landed.
        crashPoint('worker.before_step');
        const started = await startStep(db, { executionId: e.id, projectId: e.projectId, index, name: step.name, owner: workerId, external: step.external ?? false });
        if (started === 'lease_lost') throw new LeaseLost();
        if (started === 'cancel_requested') {
          await this.settle(e, 'cancelled', steps, {});
          return 'ended';
        }
      }

      let result: StepOutcome;
      try {
        result = await this.runStep(e, runner, index, step.name, step.timeoutMs ?? DEFAULT_STEP_TIMEOUT_MS, steps, prices, workDir, resuming ? recorded : undefined);
      } catch (err) {
        if (err instanceof LeaseLost || err instanceof ShuttingDown || isConnectionError(err)) throw err;
        if (err instanceof OutcomeUnknown) {
          await this.needsReview(e, index, err.message);
          return 'ended';
        }
        const failure = err instanceof StepError ? err : null;
        if (!failure) logger.error('worker.step.crashed', { ...log, step: index, err });
        const errorCode = failure?.errorCode ?? (isAppError(err) ? 'internal_error' : 'internal_error');
        if (!(await finishStep(db, { executionId: e.id, projectId: e.projectId, index, owner: workerId, status: 'failed', costMicros: 0, errorCode }))) {
          throw new LeaseLost();
        }
        steps = recordLocally(steps, e.id, index, step.name, { status: 'failed', costMicros: 0, checkpoint: null, errorCode });
        await this.settle(e, 'failed', steps, { errorCode, errorMessage: failure?.message ?? 'the step failed unexpectedly' });
        logger.info('worker.step.failed', { ...log, step: index, errorCode });
        return 'ended';
      }

      if (isWait(result)) {
        // Frees the consumer slot; the caller has the execution come back for a re-check.
        if (!(await enterWaiting(db, { executionId: e.id, owner: workerId, recheckDeadlineMs: this.recheckDeadlineMs() }))) throw new LeaseLost();
        logger.info('worker.step.waiting', { ...log, step: index, name: step.name });
        return 'waiting';
      }
      const artifacts = await this.storeFiles(e, index, result);
      const checkpoint = { ...(result.checkpoint ?? {}), artifacts: artifacts.map(summary), facts: result.facts ?? {} };
      const ok = await finishStep(db, {
        executionId: e.id,
        projectId: e.projectId,
        index,
        owner: workerId,
        status: 'succeeded',
        costMicros: result.costMicros,
        checkpoint,
        artifacts,
      });
      if (!ok) {
        // Fenced out: no row will ever name these objects, so they would stay in the bucket
        // forever. (A finishStep that threw may have committed; its objects are kept.)
        await this.discard(artifacts);
        throw new LeaseLost();
      }
      logger.info('worker.step.succeeded', { ...log, step: index, name: step.name, costMicros: result.costMicros });
      steps = recordLocally(steps, e.id, index, step.name, { status: 'succeeded', costMicros: result.costMicros, checkpoint, errorCode: null });
    }

    const output: Record<string, unknown> = {};
    const allArtifacts: ArtifactSummary[] = [];
    for (const s of steps) {
      const cp = s.checkpoint as { artifacts?: ArtifactSummary[]; facts?: Record<string, unknown> } | null;
      if (cp?.facts) Object.assign(output, cp.facts);
      if (cp?.artifacts) allArtifacts.push(...cp.artifacts);
    }
    output.artifacts = allArtifacts;
    await this.settle(e, 'succeeded', steps, { output });
    return 'ended';
  }

  private async runStep(
    e: ExecutionRecord,
    runner: ToolRunner,
    index: number,
    name: string,
    timeoutMs: number,
    previous: StepRecord[],
    prices: PriceList,
    workDir: WorkDir,
    resumed: StepRecord | undefined,
  ): Promise<StepOutcome> {
    const { db, workerId, leaseTtlMs } = this.deps;
    const controller = new AbortController();
    const onShutdown = () => controller.abort(new ShuttingDown());
    this.shutdown.signal.addEventListener('abort', onShutdown, { once: true });
    // A provider reference this step has (recorded now or on an earlier run): past it, the
    // provider has the job, may finish it and bill for it.
    let providerRef = resumed?.externalRef ?? null;
    const deadline = setTimeout(() => {
      controller.abort(
        providerRef === null
          ? new StepError('step_timeout', `step ${name} exceeded ${timeoutMs} ms`)
          // not a zero-charge failure: the job may have run and cost money; an operator decides
          : new OutcomeUnknown(`step ${name} exceeded ${timeoutMs} ms after its provider job ${providerRef} was created; its outcome is unknown`),
      );
    }, timeoutMs);
    // Keep the lease alive while the step runs; losing it aborts the step.
    const renew = setInterval(
      () => {
        renewLease(db, e.id, workerId, leaseTtlMs)
          .then((r) => {
            if (!r) controller.abort(new LeaseLost());
          })
          .catch(() => undefined);
      },
      Math.max(250, Math.floor(leaseTtlMs / 3)),
    );
    try {
      const result = await runner.runStep({
        execution: e,
        args: e.arguments,
        index,
        name,
        signal: controller.signal,
        previous,
        externalRef: resumed?.externalRef ?? null,
        stepCheckpoint: resumed?.checkpoint ?? null,
        recordExternalRef: async (ref, checkpoint) => {
          if (!(await recordExternalRef(db, { executionId: e.id, index, owner: workerId, externalRef: ref, checkpoint: checkpoint ?? null }))) {
            throw new LeaseLost();
          }
          providerRef = ref;
        },
        prices,
        get workDir() {
          return workDir.path;
        },
        inputFile: (fileId) => this.fetchInput(e, fileId, workDir.path, controller.signal),
        catalog: this.deps.catalog,
        store: this.deps.store,
        logger: this.deps.logger,
        providers: this.deps.providers,
        sandbox: this.sandbox,
      });
      if (controller.signal.aborted) throw controller.signal.reason;
      if (!isWait(result) && (!Number.isSafeInteger(result.costMicros) || result.costMicros < 0)) throw new Error(`step ${name} reported an invalid cost`);
      return result;
    } catch (err) {
      throw controller.signal.aborted ? controller.signal.reason : err;
    } finally {
      clearTimeout(deadline);
      clearInterval(renew);
      this.shutdown.signal.removeEventListener('abort', onShutdown);
    }
  }

  private async fetchInput(e: ExecutionRecord, fileId: string, workDir: string, signal: AbortSignal): Promise<InputFile> {
    // Scoped to the execution's project: a file id of another project does not resolve.
    const file = await getExecutionInputFile(this.deps.db, e.projectId, e.id, fileId);
    if (!file) throw new StepError('invalid_input_file', `input file ${fileId} is no longer available`);
    const bytes = await this.deps.store.get(file.storageKey, signal);
    const target = path.join(workDir, `${file.id}.${file.format}`);
    await writeFile(target, bytes);
    return { path: target, format: file.format, sizeBytes: bytes.length };
  }

  private async needsReview(e: ExecutionRecord, index: number, message: string): Promise<void> {
    if (!(await markNeedsReview(this.deps.db, { executionId: e.id, owner: this.deps.workerId, errorCode: 'provider_outcome_unknown', errorMessage: message }))) {
      throw new LeaseLost();
    }
    this.deps.metrics.executionsTotal.inc({ tool: e.tool, status: 'needs_review' });
    this.deps.logger.warn('worker.execution.needs_review', { executionId: e.id, projectId: e.projectId, tool: e.tool, step: index });
  }

  /** Best-effort removal of objects this worker stored and no row names. */
  private async discard(artifacts: NewArtifact[]): Promise<void> {
    for (const a of artifacts) {
      await this.deps.store.delete(a.storageKey).catch((err: unknown) =>
        this.deps.logger.warn('worker.artifact.orphaned', { storageKey: a.storageKey, err: (err as Error).message }));
    }
  }

  private async storeFiles(e: ExecutionRecord, index: number, result: StepResult): Promise<NewArtifact[]> {
    const out: NewArtifact[] = [];
    try {
      await this.putFiles(e, index, result, out);
    } catch (err) {
      await this.discard(out);
      throw err;
    }
    return out;
  }

  private async putFiles(e: ExecutionRecord, index: number, result: StepResult, out: NewArtifact[]): Promise<void> {
    for (const f of result.files ?? []) {
      const id = newId('art');
      const key = artifactKey(e.projectId, e.id, id, f.format);
      await this.deps.store.put({ key, body: f.body, contentType: f.mimeType });
      out.push({
        id,
        format: f.format,
        mimeType: f.mimeType,
        sizeBytes: f.body.length,
        sha256: sha256Hex(f.body),
        storageKey: key,
        fileName: `${e.id}-${index}.${f.format}`,
        expiresAt: new Date(Date.now() + RETENTION_MS),
      });
    }
  }

  private async settle(
    e: ExecutionRecord,
    status: 'succeeded' | 'failed' | 'cancelled',
    steps: StepRecord[],
    extra: { output?: Record<string, unknown>; errorCode?: string; errorMessage?: string },
  ): Promise<void> {
    const { db, logger, metrics, workerId } = this.deps;
    const cost = steps.filter((s) => s.status === 'succeeded').reduce((sum, s) => sum + s.costMicros, 0);
    const timer = metrics.settlementDuration.startTimer();
    const settled = await settleExecution(db, {
      executionId: e.id,
      projectId: e.projectId,
      status,
      chargedMicros: Math.min(cost, e.reservedMicros),
      from: ['running'],
      leaseOwner: workerId,
      output: extra.output ?? null,
      errorCode: extra.errorCode ?? null,
      errorMessage: extra.errorMessage ?? null,
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
  }

  /**
   * How long an execution this worker handed back (waiting on a provider, or released) may go
   * untouched before the relay publishes a message for it itself: the delayed message the
   * worker sent should have brought it back well before; if it was lost, the execution is back
   * within a lease TTL, as after a crash.
   */
  private recheckDeadlineMs(): number {
    return Math.max(this.deps.waitMs * 4, this.deps.leaseTtlMs);
  }

  /** Price lists are immutable per version, so they are cached for the process's life. */
  private async prices(version: string): Promise<PriceList> {
    const cached = this.priceCache.get(version);
    if (cached) return cached;
    const found = await getPriceVersion(this.deps.db, version);
    if (!found) throw new Error(`price version ${version} not found`);
    this.priceCache.set(version, found.prices as PriceList);
    return found.prices as PriceList;
  }
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

function summary(a: NewArtifact): ArtifactSummary {
  return { id: a.id, format: a.format, mimeType: a.mimeType, sizeBytes: a.sizeBytes, sha256: a.sha256, expiresAt: a.expiresAt.toISOString() };
}

export function newWorkerId(): string {
  return `wrk_${process.pid}_${randomUUID().slice(0, 8)}`;
}

/**
 * An execution's scratch folder, created on first use and removed after the execution: steps
 * that call a provider or write their result from memory (test.sleep, image.generate) never
 * need one. Created synchronously because the tools read `ctx.workDir` as a plain string; a
 * mkdtemp is one syscall, next to the media programs of the steps that use it.
 */
class WorkDir {
  private dir: string | undefined;
  constructor(private readonly prefix: string) {}

  get path(): string {
    this.dir ??= mkdtempSync(this.prefix);
    return this.dir;
  }

  async remove(): Promise<void> {
    if (this.dir) await rm(this.dir, { recursive: true, force: true });
  }
}
