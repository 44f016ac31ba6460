import type { Knex } from 'knex';
import { parseExecutionMessage } from '@tes/core';
import { abandonExecution, MAX_ATTEMPTS, oldestUnsentAgeSeconds, reapExpiredLeases, sweepExpired, sweepOutbox } from '@tes/db';
import { publishOutbox, type ConfirmPublisher } from '@tes/messaging';
import type { Logger, Metrics } from '@tes/observability';

export interface RelayOptions {
  db: Knex;
  publisher: Pick<ConfirmPublisher, 'publish'>;
  logger: Logger;
  metrics: Metrics;
  intervalMs: number;
  /** Rows younger than this are left to the gateway that wrote them. */
  graceMs: number;
  batchSize?: number;
  /** How long a re-published execution has before the reaper publishes it again (grows with age). */
  redispatchMs: number;
  /** Deletes a stored object (the janitor's hand on object storage); the signal ends the call. */
  deleteObject: (key: string, signal: AbortSignal) => Promise<void>;
  janitorIntervalMs: number;
  /** One object delete's bound, retries included (default 10 s); no row is locked meanwhile (sweepExpired). */
  janitorDeleteTimeoutMs?: number;
  /** A publish not confirmed by then counts as failed (default 10 s). */
  publishTimeoutMs?: number;
}

/**
 * The relay's loop: publish outbox rows the gateway could not publish, and hand back
 * executions whose worker lease expired. Safe to run in several replicas: both claims use
 * FOR UPDATE SKIP LOCKED.
 */
export class Relay {
  private timer: NodeJS.Timeout | undefined;
  private janitorTimer: NodeJS.Timeout | undefined;
  private janitorRunning: Promise<unknown> | undefined;
  private running: Promise<void> | undefined;
  /** Aborted by stop(): a pass in flight ends at its next step instead of draining its backlog. */
  private readonly stopping = new AbortController();

  constructor(private readonly o: RelayOptions) {}

  start(): void {
    this.schedule(0);
    this.janitorTimer = setInterval(() => {
      this.janitorRunning ??= this.janitor().finally(() => (this.janitorRunning = undefined));
    }, this.o.janitorIntervalMs);
  }

  /**
   * A message the broker dead-lettered (delivery limit reached: workers kept crashing or
   * failing on it). The execution is abandoned unless a worker holds a live lease on it.
   */
  async handleDeadLetter(payload: unknown): Promise<'ack'> {
    const message = parseExecutionMessage(payload);
    if (!message) {
      this.o.logger.error('relay.dead_letter.malformed', {});
      return 'ack';
    }
    const { executionId } = message;
    const outcome = await abandonExecution(this.o.db, {
      executionId,
      errorCode: 'delivery_limit_exceeded',
      errorMessage: 'its messages were dead-lettered after repeated delivery failures',
    });
    this.o.logger.warn('relay.dead_letter.handled', { executionId, outcome });
    return 'ack';
  }

  /** Deletes uploads and artifacts past their 30 days (ended rate-limit windows: retention.ts). */
  async janitor(): Promise<{ files: number; artifacts: number }> {
    const { db, logger } = this.o;
    const out = { files: 0, artifacts: 0 };
    try {
      for (const table of ['files', 'artifacts'] as const) {
        while (!this.stopped) {
          const { deleted, failed } = await sweepExpired(db, table, this.o.batchSize ?? 100, this.o.deleteObject, {
            deleteTimeoutMs: this.o.janitorDeleteTimeoutMs,
            signal: this.stopping.signal,
          });
          out[table] += deleted;
          if (failed > 0 && !this.stopped) logger.warn('relay.janitor.delete_failed', { table, failed });
          if (deleted < (this.o.batchSize ?? 100)) break;
        }
      }
      if (out.files + out.artifacts > 0) logger.info('relay.janitor.deleted', out);
    } catch (err) {
      logger.warn('relay.janitor.failed', { err: (err as Error).message });
    }
    return out;
  }

  private schedule(ms: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.running = this.tick().then(
        () => undefined,
        () => undefined,
      );
      void this.running.finally(() => {
        this.running = undefined;
        this.schedule(this.o.intervalMs);
      });
    }, ms);
  }

  /** One pass; exported for tests and for `relay --once`. */
  async tick(): Promise<{ published: number; reaped: number }> {
    const { db, logger, metrics } = this.o;
    let published = 0;
    let reaped = 0;
    try {
      const { requeued, leasesLost, exhausted } = await reapExpiredLeases(db, {
        limit: this.o.batchSize ?? 100,
        maxAttempts: MAX_ATTEMPTS,
        redispatchMs: this.o.redispatchMs,
      });
      reaped = requeued.length;
      if (leasesLost.length > 0) {
        metrics.leaseExpiries.inc(leasesLost.length);
        logger.warn('relay.lease.expired', { count: leasesLost.length, executionIds: leasesLost.slice(0, 20) });
      }
      if (reaped > leasesLost.length) {
        // queued past its dispatch deadline, handed back, or a provider re-check overdue: its message was lost or is late
        const others = requeued.filter((id) => !leasesLost.includes(id));
        logger.warn('relay.execution.redispatched', { count: others.length, executionIds: others.slice(0, 20) });
      }
      for (const executionId of exhausted) {
        const outcome = await abandonExecution(db, {
          executionId,
          errorCode: 'delivery_limit_exceeded',
          errorMessage: `no worker finished it in ${MAX_ATTEMPTS} attempts`,
        });
        logger.error('relay.execution.abandoned', { executionId, outcome, reason: 'attempts_exhausted' });
      }
      // Reaped executions got fresh outbox rows; publish them in this pass (no grace). A backlog
      // is drained batch by batch until stop(): what is left waits for the next relay.
      while (!this.stopped) {
        const n = await sweepOutbox(db, { graceMs: reaped > 0 ? 0 : this.o.graceMs, limit: this.o.batchSize ?? 100 }, (entries) =>
          publishOutbox(this.o.publisher, entries, this.o.publishTimeoutMs),
        );
        published += n;
        if (n < (this.o.batchSize ?? 100)) break;
      }
      if (published > 0) {
        metrics.outboxPublished.inc({ source: 'relay' }, published);
        logger.info('relay.outbox.published', { count: published });
      }
      metrics.outboxLagSeconds.set(await oldestUnsentAgeSeconds(db));
    } catch (err) {
      logger.warn('relay.tick.failed', { err: (err as Error).message });
    }
    return { published, reaped };
  }

  private get stopped(): boolean {
    return this.stopping.signal.aborted;
  }

  async stop(): Promise<void> {
    this.stopping.abort();
    if (this.timer) clearTimeout(this.timer);
    if (this.janitorTimer) clearInterval(this.janitorTimer);
    await Promise.all([this.running, this.janitorRunning]);
  }
}
