import type { Channel, ConsumeMessage } from 'amqplib';
import type { Logger } from '@tes/observability';
import type { AmqpClient } from './connection';

/**
 * What to do with a message once the handler is done:
 *  - ack: state is durable (or there was nothing to do)
 *  - retry: put it back (transient failure); the queue's delivery limit bounds the loop
 *  - dead: reject without requeue; the queue dead-letters it with its reason
 */
export type Disposition = 'ack' | 'retry' | 'dead';

export interface ConsumerOptions {
  queue: string;
  /** prefetch = concurrency: the broker never hands this consumer more than it can run. */
  concurrency: number;
  handler: (payload: unknown, message: ConsumeMessage) => Promise<Disposition>;
}

/**
 * A manual-ack consumer that survives reconnects. Messages are acked only after the
 * handler returned, i.e. after the state it produced is durable. stop() cancels intake
 * and waits for in-flight handlers up to the caller's deadline.
 */
export class Consumer {
  private channel: Channel | undefined;
  private consumerTag: string | undefined;
  private inFlight = new Set<Promise<void>>();
  private stopping = false;

  constructor(
    private readonly client: AmqpClient,
    private readonly options: ConsumerOptions,
    private readonly logger: Logger,
  ) {}

  get active(): number {
    return this.inFlight.size;
  }

  async start(): Promise<void> {
    await this.client.addSetup(async (conn) => {
      if (this.stopping) return;
      const ch = await conn.createChannel();
      ch.on('error', (err: Error) => this.logger.warn('amqp.consumer.channel_error', { queue: this.options.queue, err: err.message }));
      ch.on('close', () => {
        if (this.channel === ch) this.channel = undefined;
      });
      await ch.prefetch(this.options.concurrency);
      const { consumerTag } = await ch.consume(this.options.queue, (msg) => {
        if (msg) this.dispatch(ch, msg);
      });
      this.channel = ch;
      this.consumerTag = consumerTag;
    });
  }

  private dispatch(ch: Channel, msg: ConsumeMessage): void {
    const run = (async () => {
      let disposition: Disposition;
      try {
        disposition = await this.options.handler(parse(msg), msg);
      } catch (err) {
        this.logger.error('amqp.consumer.handler_failed', { queue: this.options.queue, err });
        disposition = 'retry';
      }
      // A message from a channel that has since closed is redelivered by the broker;
      // acking on a dead channel would throw, so only settle it on the live one.
      if (this.channel !== ch) return;
      try {
        if (disposition === 'ack') ch.ack(msg);
        else ch.nack(msg, false, disposition === 'retry');
      } catch (err) {
        this.logger.warn('amqp.consumer.settle_failed', { queue: this.options.queue, err: (err as Error).message });
      }
    })();
    this.inFlight.add(run);
    void run.finally(() => this.inFlight.delete(run));
  }

  /** Stops taking messages and waits for the ones in flight. */
  async stop(): Promise<void> {
    this.stopping = true;
    const ch = this.channel;
    if (ch && this.consumerTag) await ch.cancel(this.consumerTag).catch(() => undefined);
    await Promise.allSettled([...this.inFlight]);
    if (ch) await ch.close().catch(() => undefined);
    this.channel = undefined;
  }
}

function parse(msg: ConsumeMessage): unknown {
  try {
    return JSON.parse(msg.content.toString('utf8'));
  } catch {
    return undefined;
  }
}
