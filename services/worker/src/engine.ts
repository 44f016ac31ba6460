import { randomUUID } from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { claimNextFair, isConnectionError, isRolledBackError, releaseLease, resumeExecution, type ClaimedExecution } from '@tes/db';
import { parseExecutionMessage, type ExecutionMessage } from '@tes/core';
import { crashPoint } from '@tes/lifecycle';
import type { Delivery, Disposition } from '@tes/messaging';
import { withSpan } from '@tes/tracing';
import { cachedPriceLists, LeaseLost, ShuttingDown, type ExecutionDeps } from './execution/context';
import { LeaseKeeper } from './execution/lease';
import { runExecution } from './execution/run';
import { WorkDir } from './execution/work-dir';
import { SharpSandbox } from './media/sharp-sandbox';

/** What the engine takes: what running an execution needs (it makes the rest itself), and its own. */
export interface EngineDeps extends Omit<ExecutionDeps, 'sandbox' | 'shutdown' | 'draining' | 'prices' | 'recheckDeadlineMs'> {
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
  /** PROJECT_SLOT_SHARE (default 0.5): the share of a category's live slots one project or organization may hold. */
  projectSlotShare?: number;
  /** This worker's slots per category (its consumers' concurrency); 1 for a category not given. */
  slots?: Readonly<Record<string, number>>;
}

/** PROJECT_SLOT_SHARE's default (libs/config). */
const DEFAULT_PROJECT_SLOT_SHARE = 0.5;

/**
 * The step engine (docs/architecture.md#the-paths-that-must-never-lose-money-or-work, Run). For one message it claims the execution with a
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
  /** Aborted when the drain begins: a running execution ends its current step, then is given back. */
  private readonly draining = new AbortController();
  private readonly execution: ExecutionDeps;
  /**
   * The executions this engine is running now. A message for one of them is not claimed here
   * again: its lease may have expired (renewals failing for longer than the TTL) and the reaper
   * re-dispatched it, but the run here is still going; a second run in the same process would
   * race the first. (The lease fence stops the stale run's writes either way; this stops the
   * second run from starting, and the work, provider calls included, from being done twice.)
   */
  private readonly running = new Set<string>();
  /** When each claim's statement was sent, by execution: the lease keeper counts the TTL from it. */
  private readonly claimSentAt = new Map<string, number>();
  /** False once the drain began: a slot that ends an execution takes no more. */
  private claiming = true;
  readonly sandbox: SharpSandbox;

  constructor(private readonly deps: EngineDeps) {
    this.sandbox = deps.sandbox ?? new SharpSandbox();
    this.execution = {
      ...deps,
      sandbox: this.sandbox,
      shutdown: this.shutdown.signal,
      draining: this.draining.signal,
      prices: cachedPriceLists(deps.db),
      recheckDeadlineMs: recheckDeadlineMs(deps),
    };
  }

  /** Aborts running steps; their executions are released for another worker to resume. */
  abortAll(): void {
    this.shutdown.abort(new ShuttingDown());
  }

  /**
   * The drain at shutdown: no more work. A slot takes no new message (one delivered meanwhile is
   * handed back through the delay queue) and claims no next execution; a running execution ends
   * the step it is running, records it, and is given back before its next step, which another
   * worker runs (a step started now could not end before the drain's abort).
   */
  stopClaiming(): void {
    this.claiming = false;
    this.draining.abort(new ShuttingDown());
  }

  /**
   * Handles one message from `category`'s queue. The message is a hint, "there is work in C"
   * (docs/architecture.md#fair-share-of-the-worker-slots): its execution is resumed by id when it was already started (waiting
   * on a provider, handed back, its lease expired); otherwise the slot claims the next queued
   * execution of C in the fair order, which may be another one (the database decides). When
   * that execution ends, the slot claims the next one of C before it is given up, so work that
   * was beyond its project's limit when its own message came is started as soon as it may be.
   *
   * Whatever happens, the disposition keeps the message's delivery count for what it is meant
   * for, poison messages: work given back because of a shutdown or an infrastructure outage is
   * re-sent as a fresh message through the delay queue (and this one acked), so a database
   * restart or a rolling deploy never spends the delivery limit and dead-letters healthy work.
   */
  async handle(payload: unknown, category: string, delivery?: Delivery): Promise<Disposition> {
    const { logger } = this.deps;
    const message = parseExecutionMessage(payload);
    if (!message) {
      logger.error('worker.message.malformed', {});
      return 'dead';
    }
    // Draining: a message delivered before the consumers were cancelled (or waiting for a slot)
    // is handed back, not claimed: its work could outlast the drain and be thrown away.
    if (!this.claiming || this.shutdown.signal.aborted) return this.later(message, category, 'shutdown');
    // Once the claim is durable the database carries the work (the lease, and the reaper when
    // it expires): a message need not stay unacked for the length of the slot's work, and must
    // not, for RabbitMQ closes a channel whose delivery stays unacked 30 min. It is acked when
    // the slot has no more work or after `earlyAckAfterMs` (5 min), whichever is first. Not at
    // once: an unacked delivery holds the prefetch credit, so a worker whose slots are busy is
    // sent no more work while idle workers are, which early acks for every message would undo.
    const earlyAck = delivery ? setTimeout(() => delivery.settle('ack'), this.deps.earlyAckAfterMs ?? 5 * 60_000) : undefined;
    try {
      return await this.work(message, category);
    } finally {
      clearTimeout(earlyAck);
    }
  }

  /** The slot's loop: the message's execution or the fair next, then the next, while there is one. */
  private async work(message: ExecutionMessage, category: string): Promise<Disposition> {
    const { logger } = this.deps;
    const { executionId } = message;
    const runningHere = this.running.has(executionId);
    let execution: ClaimedExecution | null;
    try {
      // A message for an execution running here is not resumed here again: its lease may have
      // expired (renewals failing for longer than the TTL) and the reaper re-dispatched it, but
      // the run here is still going; a second run in the same process would race the first.
      // The fair pick takes queued work only, so it can never start a second run of it.
      // One span for the message's claim, named by what it took (the message's execution if none).
      execution = await this.claim('execution.claim', executionId, async () => {
        const resumed = runningHere ? null : await resumeExecution(this.deps.db, executionId, this.deps.workerId, this.deps.leaseTtlMs);
        return resumed ?? (await this.fairNext(category));
      });
    } catch (err) {
      if (!isConnectionError(err)) throw err;
      logger.warn('worker.execution.deferred', { executionId, reason: 'infrastructure', err: (err as Error).message });
      return await this.later(message, category, 'infrastructure');
    }
    if (!execution) {
      if (runningHere) {
        // Come back later: by then the run here has ended, or noticed that its lease is gone
        // (then another worker, or this one, resumes after its last recorded step). If the
        // re-send fails the message is acked all the same: the execution's deadline is in the
        // database, and a requeue would only bounce straight back here.
        logger.warn('worker.execution.running_here', { executionId });
        return this.later(message, category, 'running_here', true);
      }
      // Terminal, waiting for an operator, held by a live worker, or queued beyond its
      // project's limit (a slot that ends an execution of the category claims it then; its
      // dispatch deadline brings a message back meanwhile): nothing for this slot.
      logger.debug('worker.execution.skip', { executionId });
      return 'ack';
    }
    for (;;) {
      // The message's own execution gives its outcome to the message (a re-send of it when it
      // is given back); another execution claimed by this slot carries its deadline in the
      // database, and a re-send of its own is only sooner.
      const own = execution.id === executionId;
      const ended = await this.runHere(execution, own ? message : { executionId: execution.id, projectId: execution.projectId }, category, !own);
      if (ended !== 'next') return ended;
      if (!this.claiming || this.shutdown.signal.aborted) return 'ack';
      try {
        execution = await this.claim('execution.claim_next', null, () => this.fairNext(category));
      } catch (err) {
        if (!isConnectionError(err)) throw err;
        // The execution this slot ran has ended: nothing of the message is left to give back.
        logger.warn('worker.claim.failed', { category, err: (err as Error).message });
        return 'ack';
      }
      if (!execution) return 'ack';
    }
  }

  /** A claim in its span; when its statement was sent is kept for the lease keeper (it counts the TTL from it). */
  private claim(span: string, messageId: string | null, run: () => Promise<ClaimedExecution | null>): Promise<ClaimedExecution | null> {
    const claimSentAt = performance.now();
    return withSpan(span, async (s) => {
      const e = await run();
      const id = e?.id ?? messageId;
      if (id) s.setAttribute('tes.execution.id', id);
      if (e) this.claimSentAt.set(e.id, claimSentAt);
      return e;
    });
  }

  /** The next queued execution of the category in the fair order, within the limits (claimNextFair). */
  private fairNext(category: string): Promise<ClaimedExecution | null> {
    const { db, workerId, leaseTtlMs } = this.deps;
    return claimNextFair(db, {
      category,
      owner: workerId,
      leaseTtlMs,
      share: this.deps.projectSlotShare ?? DEFAULT_PROJECT_SLOT_SHARE,
      ownSlots: this.deps.slots?.[category] ?? 1,
    });
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

  /**
   * Runs a claimed execution in this slot. 'next': it ended or waits on a provider (its re-check
   * message sent), and the slot may take more work; otherwise the message's disposition, the
   * execution having been given back (shutdown, outage, contention) or its lease lost.
   * `written`: the execution is not the message's own, so a failed re-send still acks.
   */
  private async runHere(execution: ClaimedExecution, message: ExecutionMessage, category: string, written: boolean): Promise<Disposition | 'next'> {
    const { db, logger } = this.deps;
    const executionId = execution.id;
    this.running.add(executionId);
    const claimSentAt = this.claimSentAt.get(executionId) ?? performance.now();
    this.claimSentAt.delete(executionId);
    const log = { executionId, projectId: execution.projectId, tool: execution.tool, attempt: execution.attempts };
    logger.info('worker.execution.claimed', log);
    const workDir = new WorkDir(path.join(os.tmpdir(), `tes-${executionId}-`));
    // A re-send (`later`, which never rejects) starts inside the try and is answered after the
    // finally: the message goes out while the scratch folder is removed.
    let resent: Promise<Disposition>;
    let waiting = false;
    // Renews from the claim until the execution ended, waits or is given back (see LeaseKeeper).
    const lease = new LeaseKeeper(this.execution, executionId, execution.lease, claimSentAt);
    try {
      const ran = await runExecution(this.execution, execution, workDir, lease.signal).finally(() => lease.stop());
      if (ran === 'waiting') {
        waiting = true;
        resent = this.later(message, category, 'waiting', true);
      } else {
        crashPoint('worker.after_settle');
        return 'next';
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
        resent = this.later(message, category, reason, written);
      } else throw err;
    } finally {
      this.running.delete(executionId);
      await workDir.remove();
    }
    const disposition = await resent;
    // A provider re-check was scheduled: the slot is free for the category's next execution.
    return waiting ? 'next' : disposition;
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
