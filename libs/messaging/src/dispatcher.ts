import { crashPoint, type Logger } from '@tes/observability';

export interface Publisher {
  publish(routingKey: string, payload: unknown, options: { messageId: string }): Promise<void>;
}

/**
 * Publishes an outbox row right after the transaction that wrote it committed, and marks
 * it sent once the broker confirmed. A failure loses nothing: the row stays unsent and the
 * relay publishes it after its grace period. Publishes run off the caller's path; stop()
 * waits for the ones in flight.
 */
export class OutboxDispatcher {
  private readonly pending = new Set<Promise<void>>();

  constructor(
    private readonly publisher: Publisher,
    private readonly markPublished: (outboxId: number) => Promise<void>,
    private readonly logger: Logger,
    private readonly onPublished: () => void = () => undefined,
  ) {}

  dispatch(outboxId: number, routingKey: string, payload: Record<string, unknown>): void {
    const run = (async () => {
      try {
        await this.publisher.publish(routingKey, payload, { messageId: `outbox-${outboxId}` });
        crashPoint('outbox.after_publish');
        await this.markPublished(outboxId);
        this.onPublished();
      } catch (err) {
        this.logger.warn('outbox.publish_deferred', { outboxId, executionId: payload.executionId, err: (err as Error).message });
      }
    })();
    this.pending.add(run);
    void run.finally(() => this.pending.delete(run));
  }

  async stop(): Promise<void> {
    await Promise.allSettled([...this.pending]);
  }
}
