import { setMaxListeners } from 'node:events';
import type { Knex } from 'knex';
import { canonicalJson, type PublicExecution, type WebhookEventBody } from '@tes/core';
import {
  claimDueDeliveries,
  deliveryStillWanted,
  fixDeliveryPayload,
  getExecutionById,
  getSteps,
  NotificationListener,
  publicExecution,
  recordDeliveryAttempt,
  WEBHOOK_DELIVERIES_CHANNEL,
  type DueDelivery,
} from '@tes/db';
import type { Logger, Metrics } from '@tes/observability';
import { webhookHeaders, type GuardedHttp } from '@tes/outbound';

export interface WebhookDelivererOptions {
  db: Knex;
  http: Pick<GuardedHttp, 'request'>;
  logger: Logger;
  metrics: Metrics;
  /**
   * Attempts in flight at once. One project gets at most a quarter of them and one
   * organization at most half (at least 1 each); the next free slot goes to the project with
   * the fewest in flight.
   */
  concurrency: number;
  /** One attempt's whole deadline: connect, send, the answer's headers and its whole body. */
  timeoutMs: number;
  /** Delay before each retry; past the last, the delivery is failed. */
  retryDelaysMs: readonly number[];
  /** How often due deliveries are looked for while none arrive (default 250 ms). */
  pollMs?: number;
  /**
   * When given, a LISTEN connection on tes_webhook_deliveries wakes the deliverer as soon as an
   * ended execution's deliveries commit (else they wait for the next poll).
   */
  databaseUrl?: string;
}

/**
 * Sends webhook deliveries (Standard Webhooks format), at least once. The rows come from the
 * database (written by the statement that ended the execution); a delivery is claimed as a
 * lease, sent outside any transaction, and its outcome recorded: a 2xx delivers it, anything
 * else (another status, a refused address, a timeout) schedules the next attempt, until the
 * retry schedule is spent. A relay that dies mid-attempt leaves the row leased; it is tried
 * again when the lease ends.
 *
 * An attempt cannot outlast its lease: the request has a whole-attempt deadline (`timeoutMs`,
 * however slowly the receiver trickles its answer), and the lease, renewed just before the
 * request, is twice that plus 5 s. So a delivery (one webhook-id) is never sent again while an
 * attempt of it is open, and the outcome is written only while the row is still this claim's
 * (fenced by its attempt count): a late write can neither end nor spend a newer attempt's
 * retries.
 *
 * Attempts run concurrently and independently, and the slots are shared by project and
 * organization (claimDueDeliveries): slow receivers hold at most their project's quarter and
 * their organization's half of the slots, and a slot that frees goes to the project with the
 * fewest attempts in flight. So another project's deliveries never wait for a slow project's,
 * beyond one attempt's deadline when many slow organizations together fill every slot.
 */
export class WebhookDeliverer {
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private polling: Promise<void> | undefined;
  private readonly inFlight = new Map<string, Promise<void>>();
  private readonly perProject = new Map<string, number>();
  private readonly perOrganization = new Map<string, number>();
  private readonly abort = new AbortController();

  private readonly listener: NotificationListener | undefined;
  private wakeAgain = false;

  constructor(private readonly o: WebhookDelivererOptions) {
    // every attempt in flight listens on the one shutdown signal
    setMaxListeners(o.concurrency + 10, this.abort.signal);
    this.listener = o.databaseUrl
      ? new NotificationListener({
          url: o.databaseUrl,
          applicationName: 'tes-webhooks',
          channels: { [WEBHOOK_DELIVERIES_CHANNEL]: () => this.wake() },
          // a notification missed while disconnected is found by the polls
          onListening: () => this.wake(),
          onError: (err) => o.logger.warn('relay.webhook.listen_error', { err: err.message }),
        })
      : undefined;
  }

  start(): void {
    this.schedule(0);
    void this.listener?.start();
  }

  /** Polls now: at once if idle, else right after the poll under way. */
  private wake(): void {
    if (this.stopped) return;
    if (this.polling) {
      this.wakeAgain = true;
      return;
    }
    if (this.timer) clearTimeout(this.timer);
    this.schedule(0);
  }

  /** Looks for due deliveries now (a test, or a notification that one was written). */
  async poll(): Promise<number> {
    if (this.stopped) return 0;
    const free = this.o.concurrency - this.inFlight.size;
    if (free <= 0) return 0;
    const due = await claimDueDeliveries(this.o.db, {
      limit: free,
      perProject: Math.max(1, Math.floor(this.o.concurrency / 4)),
      perOrganization: Math.max(1, Math.floor(this.o.concurrency / 2)),
      leaseMs: this.leaseMs(),
      inFlight: { projects: this.perProject, organizations: this.perOrganization },
    });
    for (const d of due) {
      count(this.perProject, d.projectId, 1);
      count(this.perOrganization, d.organizationId, 1);
      const run = this.attempt(d).finally(() => {
        this.inFlight.delete(d.id);
        count(this.perProject, d.projectId, -1);
        count(this.perOrganization, d.organizationId, -1);
      });
      this.inFlight.set(d.id, run);
    }
    return due.length;
  }

  /**
   * A claim's lease: longer than any attempt can last. The request ends by its deadline
   * (timeoutMs) after it starts, and the lease is renewed just before it starts; the other
   * timeoutMs + 5 s cover that statement's round trip and a stalled event loop.
   */
  private leaseMs(): number {
    return this.o.timeoutMs * 2 + 5_000;
  }

  /** Waits for the attempts in flight (tests). */
  async idle(): Promise<void> {
    await Promise.allSettled([...this.inFlight.values()]);
  }

  private schedule(ms: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.polling = this.poll()
        .then((n) => {
          this.polling = undefined;
          const again = this.wakeAgain;
          this.wakeAgain = false;
          this.schedule(n > 0 || again ? 0 : (this.o.pollMs ?? 250));
        })
        .catch((err: unknown) => {
          this.polling = undefined;
          this.o.logger.warn('relay.webhook.poll_failed', { err: (err as Error).message });
          this.schedule(Math.max(1_000, this.o.pollMs ?? 250));
        });
    }, ms);
  }

  private async attempt(d: DueDelivery): Promise<void> {
    const { db, logger, metrics } = this.o;
    const log = { deliveryId: d.id, endpointId: d.endpointId, executionId: d.executionId, eventType: d.eventType, attempt: d.attempts + 1 };
    let statusCode: number | null = null;
    let error: string | null = null;
    try {
      // canonical (sorted keys): the first attempt's object and the stored jsonb give the same bytes
      const body = canonicalJson(await this.payload(d));
      // Asked last, just before the request: an endpoint deleted since the claim (or a deletion
      // under way, which this waits for) gets nothing; the delivery is closed, never retried. A
      // claim that ran out and was taken by another sends nothing either; else the lease is
      // renewed, whole, for the request.
      const decision = await deliveryStillWanted(db, d.id, { attempt: d.attempt, leaseMs: this.leaseMs() });
      if (decision !== 'send') {
        logger.info(decision === 'endpoint_deleted' ? 'relay.webhook.endpoint_deleted' : 'relay.webhook.claim_lost', log);
        return;
      }
      const res = await this.o.http.request(
        'POST',
        d.url,
        {
          headers: webhookHeaders(d.secret, d.id, body),
          body,
          signal: this.abort.signal,
          // the deadline ends the attempt; the idle timeout, as long, never ends it sooner
          deadlineMs: this.o.timeoutMs,
          timeoutMs: this.o.timeoutMs,
          maxBytes: 64 * 1024,
        },
        0,
      );
      statusCode = res.status;
      if (res.status < 200 || res.status >= 300) error = `HTTP ${res.status}`;
    } catch (err) {
      error = (err as Error).message.slice(0, 300);
    }
    if (this.abort.signal.aborted && error !== null) return; // shutting down: the lease brings it back
    const delivered = error === null;
    const retryIn = this.o.retryDelaysMs[d.attempts];
    // the retry is dated by the database's clock, the one the claim compares with (not this process's)
    const retryInMs = delivered || retryIn === undefined ? null : jitter(retryIn);
    let retryAt: Date | null;
    try {
      const written = await recordDeliveryAttempt(db, d.id, { attempt: d.attempt, delivered, statusCode, error, retryInMs });
      if (!written.recorded) {
        // claimed again since (this relay stalled past the lease) or ended meanwhile: the newer claim's outcome stands
        logger.warn('relay.webhook.claim_lost', { ...log, statusCode, reason: error });
        return;
      }
      retryAt = written.retryAt;
    } catch (err) {
      // the lease ends and the attempt is made again: at least once, never lost
      logger.warn('relay.webhook.record_failed', { ...log, err: (err as Error).message });
      return;
    }
    const outcome = delivered ? 'delivered' : retryAt ? 'retry' : 'failed';
    metrics.webhookAttempts.inc({ outcome });
    if (delivered) {
      metrics.webhookDeliveryLag.observe((Date.now() - Date.parse(d.eventAt)) / 1000);
      logger.info('relay.webhook.delivered', { ...log, statusCode });
    } else {
      logger.warn(outcome === 'failed' ? 'relay.webhook.failed' : 'relay.webhook.retry', {
        ...log,
        statusCode,
        reason: error,
        ...(retryAt ? { nextAttemptAt: retryAt.toISOString() } : {}),
      });
    }
  }

  /**
   * The event body, built once and kept, so every attempt sends the same. It describes the
   * execution as the statement that caused the event left it (the delivery's snapshot), not as
   * it is now: an operator may have resolved a needs_review execution since. A delivery written
   * before snapshots existed (migration 20261126000070) has none: its body is read from the
   * execution, as it always was.
   */
  private async payload(d: DueDelivery): Promise<WebhookEventBody> {
    if (d.payload) return d.payload;
    let data: PublicExecution;
    if (d.snapshot) data = publicExecution(d.snapshot.execution, d.snapshot.steps);
    else {
      const execution = await getExecutionById(this.o.db, d.executionId);
      if (!execution) throw new Error(`execution ${d.executionId} not found`);
      data = publicExecution(execution, await getSteps(this.o.db, execution.projectId, [execution.id]));
    }
    const payload: WebhookEventBody = { type: d.eventType, timestamp: d.eventAt, data };
    await fixDeliveryPayload(this.o.db, d.id, payload);
    return payload;
  }

  /** Stops polling and abandons attempts in flight (their leases bring them back to another relay). */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    await this.listener?.stop();
    await this.polling?.catch(() => undefined);
    this.abort.abort(new Error('relay shutting down'));
    await this.idle();
  }
}

function count(counts: Map<string, number>, key: string, by: number): void {
  const n = (counts.get(key) ?? 0) + by;
  if (n <= 0) counts.delete(key);
  else counts.set(key, n);
}

/** ±10 %, so deliveries that failed together do not all come back in the same instant. */
function jitter(ms: number): number {
  return Math.round(ms * (0.9 + Math.random() * 0.2));
}
