import { performance } from 'node:perf_hooks';
import { renewLease } from '@tes/db';
import { LeaseLost, type ExecutionDeps } from './context';

type LeaseDeps = Pick<ExecutionDeps, 'db' | 'logger' | 'leaseTtlMs'>;

/**
 * Keeps a claimed execution's lease alive for as long as this worker acts on it: from the claim
 * through every step, the upload of each step's artifacts and the statement that records the
 * step's end (finishStep, or the last step's end and the settlement), until the execution is
 * ended, waits or is given back. A lease renewed only while a step's code runs expires during a
 * long upload: the reaper hands the execution to another attempt, this worker's end is fenced
 * out and its objects are thrown away, at every attempt, until the execution fails.
 *
 * `signal` aborts with LeaseLost when
 * - a renewal reports the lease gone (taken by another claim, reaped, the execution moved on), or
 * - no renewal was confirmed for a whole TTL: the renewals fail (the database is unreachable or
 *   too slow), so the lease may have expired and been reaped, and this worker must stop instead
 *   of going on as if it held it. The TTL is counted from when the last confirmed renewal (or
 *   the claim) was SENT: the database set the deadline no earlier than that, so the lease is
 *   certainly live until then.
 * Whoever holds the signal stops what it does (the step's code, an upload) and throws the
 * reason; the database's fences stay the authority on every write.
 */
export class LeaseKeeper {
  private readonly controller = new AbortController();
  private readonly timer: NodeJS.Timeout;
  private renewal: Promise<void> | undefined;
  private confirmedAt: number;
  private stopped = false;

  /** `lease`: the claim's fence (ClaimedExecution.lease); `claimSentAt`: performance.now() when that claim was sent. */
  constructor(
    private readonly deps: LeaseDeps,
    private readonly executionId: string,
    private readonly lease: string,
    claimSentAt: number,
  ) {
    this.confirmedAt = claimSentAt;
    this.timer = setInterval(() => this.tick(), Math.max(250, Math.floor(deps.leaseTtlMs / 3)));
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  /** Stops renewing (the execution ended, waits or is given back) and waits for a renewal in flight. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    await this.renewal;
  }

  private tick(): void {
    if (this.stopped) return;
    if (performance.now() - this.confirmedAt >= this.deps.leaseTtlMs) {
      this.lose('unconfirmed');
      return;
    }
    if (this.renewal) return; // one at a time: a slow renewal is not stacked up behind
    const sentAt = performance.now();
    this.renewal = renewLease(this.deps.db, this.executionId, this.lease, this.deps.leaseTtlMs)
      .then(
        (held) => {
          if (this.stopped) return; // the execution ended meanwhile: its lease is gone by design
          if (held) this.confirmedAt = sentAt;
          else this.lose('fenced');
        },
        (err: unknown) => {
          // not lost yet: the next tick tries again, and a whole TTL without a confirmation is a loss
          if (!this.stopped) this.deps.logger.warn('worker.lease.renew_failed', { executionId: this.executionId, err: (err as Error).message });
        },
      )
      .finally(() => {
        this.renewal = undefined;
      });
  }

  private lose(reason: 'fenced' | 'unconfirmed'): void {
    if (this.controller.signal.aborted) return;
    this.deps.logger.warn('worker.lease.lost', { executionId: this.executionId, reason });
    this.controller.abort(new LeaseLost());
  }
}
