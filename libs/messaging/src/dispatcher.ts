import type { OutboxEntry } from '@tes/core';
import { crashPoint } from '@tes/lifecycle';
import type { Logger } from '@tes/observability';
import { withPublishSpan } from '@tes/tracing';

export interface Publisher {
  /** `headers`: AMQP headers (the trace context's traceparent, when tracing is on). */
  publish(routingKey: string, payload: unknown, options: { messageId: string; headers?: Record<string, string> }): Promise<void>;
}

/** A publish not confirmed by then counts as failed. */
const OUTBOX_PUBLISH_TIMEOUT_MS = 10_000;

/**
 * The one way an outbox row reaches the broker, for the gateway's dispatcher and the relay's
 * sweep alike: confirmed publishes with the row's id as message id, each bounded by
 * `timeoutMs`. Bounded because a blocked broker (a memory or disk alarm) never confirms: the
 * sweep holds its rows locked meanwhile and a stopping dispatcher waits for its publishes. A
 * publish confirmed after its timeout leaves the row unsent, so it is published again: a
 * duplicate message is harmless (claims are fenced).
 */
export async function publishOutbox(
  publisher: Publisher,
  entries: readonly OutboxEntry[],
  timeoutMs: number = OUTBOX_PUBLISH_TIMEOUT_MS,
): Promise<{ published: number[]; failed: { id: number; error: string }[] }> {
  const results = await Promise.allSettled(
    entries.map((e) =>
      withPublishSpan('outbox.publish', e.traceparent, (headers) =>
        withTimeout(publisher.publish(e.routingKey, e.message, { messageId: `outbox-${e.id}`, headers }), timeoutMs),
      ),
    ),
  );
  const published: number[] = [];
  const failed: { id: number; error: string }[] = [];
  results.forEach((res, i) => {
    const id = entries[i]!.id;
    if (res.status === 'fulfilled') published.push(id);
    else failed.push({ id, error: res.reason instanceof Error ? res.reason.message : String(res.reason) });
  });
  return { published, failed };
}

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`not confirmed within ${ms} ms`)), ms);
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}

/**
 * Publishes an outbox row right after the transaction that wrote it committed, and marks
 * it sent once the broker confirmed. Confirmed rows are marked in batches (one UPDATE per
 * `markIntervalMs`), saving a commit per message. A failure or a crash before the mark loses
 * nothing: the row stays unsent and the relay publishes it again after its grace period (a
 * duplicate message, which workers ignore). Publishes run off the caller's path; stop()
 * waits for the ones in flight and marks what was confirmed.
 */
export class OutboxDispatcher {
  private readonly pending = new Set<Promise<void>>();
  private confirmed: number[] = [];
  private flushTimer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> = Promise.resolve();

  constructor(
    private readonly publisher: Publisher,
    private readonly markPublished: (outboxIds: number[]) => Promise<void>,
    private readonly logger: Logger,
    private readonly onPublished: (count: number) => void = () => undefined,
    private readonly markIntervalMs = 20,
    private readonly publishTimeoutMs = OUTBOX_PUBLISH_TIMEOUT_MS,
  ) {}

  /** Publishes the row a committed transaction wrote (off the caller's path). */
  dispatch(entry: OutboxEntry): void {
    const run = (async () => {
      const { published, failed } = await publishOutbox(this.publisher, [entry], this.publishTimeoutMs);
      if (published.length === 0) {
        this.logger.warn('outbox.publish_deferred', { outboxId: entry.id, executionId: entry.message.executionId, err: failed[0]?.error });
        return;
      }
      crashPoint('outbox.after_publish');
      this.confirmed.push(entry.id);
      this.flushTimer ??= setTimeout(() => void this.flush(), this.markIntervalMs);
    })();
    this.pending.add(run);
    void run.finally(() => this.pending.delete(run));
  }

  private flush(): Promise<void> {
    this.flushTimer = undefined;
    const ids = this.confirmed;
    this.confirmed = [];
    if (ids.length === 0) return this.flushing;
    this.flushing = this.flushing.then(async () => {
      try {
        await this.markPublished(ids);
        this.onPublished(ids.length);
      } catch (err) {
        this.logger.warn('outbox.mark_deferred', { count: ids.length, err: (err as Error).message });
      }
    });
    return this.flushing;
  }

  async stop(): Promise<void> {
    await Promise.allSettled([...this.pending]);
    if (this.flushTimer) clearTimeout(this.flushTimer);
    await this.flush();
  }
}
