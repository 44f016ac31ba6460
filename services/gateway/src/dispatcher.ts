import type { Knex } from 'knex';
import { markOutboxPublished } from '@tes/db';
import type { Logger, Metrics } from '@tes/observability';

export interface Publisher {
  publish(routingKey: string, payload: unknown, options: { messageId: string }): Promise<void>;
}

/**
 * Publishes an outbox row right after its transaction committed, and marks it sent once
 * the broker confirmed. A failure here loses nothing: the row stays unsent and the relay
 * publishes it after its grace period. Publishes run off the request path; stop() waits
 * for the ones in flight.
 */
export class OutboxDispatcher {
  private readonly pending = new Set<Promise<void>>();

  constructor(
    private readonly db: Knex,
    private readonly publisher: Publisher,
    private readonly logger: Logger,
    private readonly metrics: Metrics,
  ) {}

  dispatch(outboxId: number, routingKey: string, payload: Record<string, unknown>): void {
    const run = (async () => {
      try {
        await this.publisher.publish(routingKey, payload, { messageId: `outbox-${outboxId}` });
        await markOutboxPublished(this.db, [outboxId]);
        this.metrics.outboxPublished.inc({ source: 'gateway' });
      } catch (err) {
        this.logger.warn('gateway.outbox.publish_deferred', { outboxId, executionId: payload.executionId, err: (err as Error).message });
      }
    })();
    this.pending.add(run);
    void run.finally(() => this.pending.delete(run));
  }

  async stop(): Promise<void> {
    await Promise.allSettled([...this.pending]);
  }
}
