import type { ConfirmChannel } from 'amqplib';
import type { Logger } from '@tes/observability';
import type { AmqpClient } from './connection';

/**
 * Publishes on a confirm channel: a publish resolves only once the broker has taken
 * responsibility for the message (persisted, for quorum queues replicated). Confirms are
 * pipelined: many publishes may be in flight on the one channel.
 */
export class ConfirmPublisher {
  private channel: ConfirmChannel | undefined;

  constructor(
    private readonly client: AmqpClient,
    private readonly exchange: string,
    private readonly logger: Logger,
  ) {}

  async start(): Promise<void> {
    await this.client.addSetup(async (conn) => {
      const ch = await conn.createConfirmChannel();
      ch.on('error', (err: Error) => this.logger.warn('amqp.publisher.channel_error', { err: err.message }));
      ch.on('close', () => {
        if (this.channel === ch) this.channel = undefined;
      });
      this.channel = ch;
    });
  }

  get ready(): boolean {
    return this.channel !== undefined;
  }

  publish(routingKey: string, payload: unknown, options: { messageId: string }): Promise<void> {
    const ch = this.channel;
    if (!ch) return Promise.reject(new Error('broker connection is not available'));
    return new Promise<void>((resolve, reject) => {
      try {
        ch.publish(
          this.exchange,
          routingKey,
          Buffer.from(JSON.stringify(payload)),
          { persistent: true, contentType: 'application/json', messageId: options.messageId, mandatory: false },
          (err) => (err ? reject(err instanceof Error ? err : new Error('message was nacked by the broker')) : resolve()),
        );
      } catch (err) {
        reject(err as Error);
      }
    });
  }
}
