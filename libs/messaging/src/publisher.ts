import type { ChannelModel, ConfirmChannel } from 'amqplib';
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
    await this.client.addSetup((conn) => this.open(conn).then(() => undefined));
  }

  /** The connection of the latest channel: where a channel the broker closed is opened again. */
  private conn: ChannelModel | undefined;
  private opening: Promise<ConfirmChannel> | undefined;

  private async open(conn: ChannelModel): Promise<ConfirmChannel> {
    this.conn = conn;
    const ch = await conn.createConfirmChannel();
    ch.on('error', (err: Error) => this.logger.warn('amqp.publisher.channel_error', { err: err.message }));
    ch.on('close', () => {
      if (this.channel === ch) this.channel = undefined;
    });
    this.channel = ch;
    return ch;
  }

  /**
   * The channel to publish on. A channel the broker closed while the connection stays up (a
   * channel error) is opened again here, once for all publishes waiting on it; a lost connection
   * is the reconnect's to replay.
   */
  private async channelForPublish(): Promise<ConfirmChannel> {
    if (this.channel) return this.channel;
    const conn = this.conn;
    if (!conn || !this.client.isOpen(conn)) throw new Error('broker connection is not available');
    this.opening ??= this.open(conn).finally(() => (this.opening = undefined));
    return this.opening;
  }

  async publish(routingKey: string, payload: unknown, options: { messageId: string; headers?: Record<string, string> }): Promise<void> {
    const ch = await this.channelForPublish();
    return new Promise<void>((resolve, reject) => {
      try {
        ch.publish(
          this.exchange,
          routingKey,
          Buffer.from(JSON.stringify(payload)),
          { persistent: true, contentType: 'application/json', messageId: options.messageId, headers: options.headers, mandatory: false },
          (err) => (err ? reject(err instanceof Error ? err : new Error('message was nacked by the broker')) : resolve()),
        );
      } catch (err) {
        reject(err);
      }
    });
  }
}
