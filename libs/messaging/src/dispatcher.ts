import { crashPoint, type Logger } from '@tes/observability';

export interface Publisher {
  publish(routingKey: string, payload: unknown, options: { messageId: string }): Promise<void>;
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
  ) {}

  dispatch(outboxId: number, routingKey: string, payload: Record<string, unknown>): void {
    const run = (async () => {
      try {
        await this.publisher.publish(routingKey, payload, { messageId: `outbox-${outboxId}` });
        crashPoint('outbox.after_publish');
        this.confirmed.push(outboxId);
        this.flushTimer ??= setTimeout(() => void this.flush(), this.markIntervalMs);
      } catch (err) {
        this.logger.warn('outbox.publish_deferred', { outboxId, executionId: payload.executionId, err: (err as Error).message });
      }
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
