import { randomUUID } from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { claimExecution, isConnectionError, isRolledBackError, parseExecutionMessage, releaseLease, type ExecutionMessage } from '@tes/db';
import { crashPoint } from '@tes/lifecycle';
import type { Delivery, Disposition } from '@tes/messaging';
import { withSpan } from '@tes/tracing';
import { cachedPriceLists, LeaseLost, ShuttingDown, type ExecutionDeps } from './execution/context';
import { LeaseKeeper } from './execution/lease';
import { runExecution } from './execution/run';
import { WorkDir } from './execution/work-dir';
import { SharpSandbox } from './media/sharp-sandbox';

/** What the engine takes: what running an execution needs (it makes the rest itself), and its own. */
export interface EngineDeps extends Omit<ExecutionDeps, 'sandbox' | 'shutdown' | 'prices' | 'recheckDeadlineMs'> {
  /** Unique per process; each claim's lease is this id and the claim's number (claimExecution). */
  workerId: string;
  /** The delay queues' delay: how soon a message sent by `publishLater` comes back. */
  waitMs: number;
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

/**
 * The step engine (architecture.md, path 2). For one message it claims the execution with a
 * lease, runs the remaining steps in order, records each step before and after it runs,
 * stops before a new step when cancellation was requested, and settles. Every write is
 * fenced by the lease, so a worker that lost its lease (expired, reaped) changes nothing.
 * The message is acked only after the resulting state is durable.
 *
 * This file is the message side (claim, ack, come back later, give back); running the claimed
 * execution's steps is `execution/run.ts`, one step with its deadline and pricing
 * `execution/step.ts`, artifacts `execution/artifacts.ts`, settlement `execution/settle.ts`.
 */
export class StepEngine {
  private readonly shutdown = new AbortController();
  private readonly execution: ExecutionDeps;
  /**
   * The executions this engine is running now. A message for one of them is not claimed here
   * again: its lease may have expired (renewals failing for longer than the TTL) and the reaper
   * re-dispatched it, but the run here is still going; a second run in the same process would
   * race the first. (The lease fence stops the stale run's writes either way; this stops the
   * second run from starting, and the work, provider calls included, from being done twice.)
   */
  private readonly running = new Set<string>();
  readonly sandbox: SharpSandbox;

  constructor(private readonly deps: EngineDeps) {
    this.sandbox = deps.sandbox ?? new SharpSandbox();
    this.execution = {
      ...deps,
      sandbox: this.sandbox,
      shutdown: this.shutdown.signal,
      prices: cachedPriceLists(deps.db),
      recheckDeadlineMs: recheckDeadlineMs(deps),
    };
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
    if (this.running.has(executionId)) {
      // Come back later: by then the run here has ended, or noticed that its lease is gone
      // (then another worker, or this one, resumes after its last recorded step). If the
      // re-send fails the message is acked all the same: the execution's deadline is in the
      // database, and a requeue would only bounce straight back here.
      logger.warn('worker.execution.running_here', { executionId });
      return this.later(message, category, 'running_here', true);
    }
    this.running.add(executionId);
    try {
      return await this.handleClaimed(executionId, message, category, delivery);
    } catch (err) {
      if (!isConnectionError(err)) throw err;
      logger.warn('worker.execution.deferred', { executionId, reason: 'infrastructure', err: (err as Error).message });
      return await this.later(message, category, 'infrastructure');
    } finally {
      this.running.delete(executionId);
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
    const claimSentAt = performance.now();
    const execution = await withSpan('execution.claim', (span) => {
      span.setAttribute('tes.execution.id', executionId);
      return claimExecution(db, executionId, workerId, leaseTtlMs);
    });
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
    // A re-send (`later`, which never rejects) starts inside the try and is answered after the
    // finally: the early ack is cancelled at once, and the message goes out while the scratch
    // folder is removed.
    let resent: Promise<Disposition>;
    // Renews from the claim until the execution ended, waits or is given back (see LeaseKeeper).
    const lease = new LeaseKeeper(this.execution, executionId, execution.lease, claimSentAt);
    try {
      const ran = await runExecution(this.execution, execution, workDir, lease.signal).finally(() => lease.stop());
      if (ran === 'waiting') {
        resent = this.later(message, category, 'waiting', true);
      } else {
        crashPoint('worker.after_settle');
        return 'ack';
      }
    } catch (err) {
      if (err instanceof LeaseLost) {
        // Often the lease is still live (renewals went unconfirmed for a TTL): give it back, so
        // the reaper re-dispatches at the recheck deadline without counting a crash (an attempt).
        // Fenced by this claim's lease: a no-op when another claim really took the execution.
        await releaseLease(db, executionId, execution.lease, this.execution.recheckDeadlineMs).catch(() => undefined);
        logger.warn('worker.execution.lease_lost', log);
        return 'ack';
      }
      const shuttingDown = err instanceof ShuttingDown || this.shutdown.signal.aborted;
      // A deadlock or serialization failure the settlement's retries did not get past, or a
      // statement or lock timeout (DB_*_TIMEOUT_MS), rolled its statement back: nothing is wrong with the execution, so it is given back like work
      // at a shutdown, spending no attempt (a nack would hold the lease until it expired, and
      // the reaper would count that as a crash).
      const reason = shuttingDown ? 'shutdown' : isConnectionError(err) ? 'infrastructure' : isRolledBackError(err) ? 'contention' : null;
      if (reason) {
        // Give the execution back (if the database answers; else its lease simply expires)
        // and have it come back later; the next claim resumes after the last completed step.
        await releaseLease(db, executionId, execution.lease, this.execution.recheckDeadlineMs).catch(() => undefined);
        logger.info('worker.execution.released', { ...log, reason });
        resent = this.later(message, category, reason);
      } else throw err;
    } finally {
      clearTimeout(earlyAck);
      await workDir.remove();
    }
    return resent;
  }
}

/**
 * How long an execution this worker handed back (waiting on a provider, or released) may go
 * untouched before the relay publishes a message for it itself: the delayed message the
 * worker sent should have brought it back well before; if it was lost, the execution is back
 * within a lease TTL, as after a crash.
 */
function recheckDeadlineMs(deps: Pick<EngineDeps, 'waitMs' | 'leaseTtlMs'>): number {
  return Math.max(deps.waitMs * 4, deps.leaseTtlMs);
}

export function newWorkerId(): string {
  return `wrk_${process.pid}_${randomUUID().slice(0, 8)}`;
}
