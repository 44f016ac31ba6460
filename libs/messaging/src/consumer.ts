import type { Channel, ChannelModel, ConsumeMessage } from 'amqplib';
import type { Logger } from '@tes/observability';
import { pause, retryDelayMs } from './backoff';
import type { AmqpClient } from './connection';

/**
 * What to do with a message once the handler is done:
 *  - ack: state is durable (or there was nothing to do)
 *  - retry: put it back (transient failure); the queue's delivery limit bounds the loop
 *  - dead: reject without requeue; the queue dead-letters it with its reason
 */
export type Disposition = 'ack' | 'retry' | 'dead';

/** A handler's hold on its message. */
export interface Delivery {
  /**
   * Settles the message now, while the handler goes on (holding its slot). For work whose
   * state is durable in the database before it ends: a message need not stay unacked for the
   * length of an execution (and meet the broker's consumer timeout). Later calls, and the
   * handler's returned disposition, are then ignored.
   */
  settle(disposition: Disposition): void;
}

export interface ConsumerOptions {
  queue: string;
  /**
   * Handlers running at once; also the prefetch. A message that arrives while every slot is
   * taken (possible once handlers settle early) waits for one.
   */
  concurrency: number;
  handler: (payload: unknown, message: ConsumeMessage, delivery: Delivery) => Promise<Disposition>;
  /** A message that waited this long for a slot goes to `onOverflow` (default 30 s). */
  maxWaitMs?: number;
  /** Decides a message that waited too long for a slot (e.g. re-send it later and ack it); without it, it keeps waiting. */
  onOverflow?: (payload: unknown, message: ConsumeMessage) => Promise<Disposition>;
}

interface Waiting {
  ch: Channel;
  msg: ConsumeMessage;
  timer: NodeJS.Timeout | undefined;
}

interface Subscription {
  conn: ChannelModel;
  ch: Channel;
  consumerTag: string;
}

/**
 * A manual-ack consumer that survives reconnects and broker-side channel losses. A message is
 * settled when its handler returns, or earlier when the handler says its state is durable
 * (Delivery.settle: the worker acks once its claim is in the database). At most `concurrency`
 * handlers run at once, whatever has been acked. stop() cancels intake and waits for in-flight
 * handlers up to the caller's deadline.
 *
 * The broker can end a subscription while the connection stays up: it closes the channel
 * (PRECONDITION_FAILED when a delivery stayed unacked past its consumer timeout, 30 min by
 * default; any other channel error) or cancels the consumer (basic.cancel, e.g. the queue was
 * deleted). Then the consumer subscribes again on a new channel of the same connection, with
 * the reconnect's backoff, until it is back, the connection goes (the connection's replay
 * subscribes on the next one) or stop() is called. `consuming` is false meanwhile, for
 * readiness.
 *
 * Handlers still running for a dead channel are not stopped. Their messages went back to the
 * queue and may be redelivered (here or elsewhere) while they run; they are never settled on
 * another channel, and the work they do is fenced downstream. They keep their slots: a
 * redelivery here waits for one, so this process never runs more than `concurrency` handlers.
 */
export class Consumer {
  /** Set once consume succeeded; cleared the moment the broker ends it. */
  private live: Subscription | undefined;
  /** The connection of the latest subscribe: where a recovery subscribes again. */
  private conn: ChannelModel | undefined;
  /** Subscribes run one at a time, so a replay and a recovery never both subscribe. */
  private subscribing: Promise<void> = Promise.resolve();
  private recovery: { done: Promise<void>; wake: AbortController } | undefined;
  private inFlight = new Set<Promise<void>>();
  /** Handlers holding a slot (concurrency counts these, not unacked messages). */
  private running = 0;
  private readonly waiting: Waiting[] = [];
  private stopping = false;

  constructor(
    private readonly client: AmqpClient,
    private readonly options: ConsumerOptions,
    private readonly logger: Logger,
  ) {}

  /** True while the broker has a live consumer of this queue for us (readiness). */
  get consuming(): boolean {
    return this.live !== undefined && !this.stopping;
  }

  async start(): Promise<void> {
    // a lost connection ends a recovery's wait: the replay takes over
    this.client.onConnectionChange((connected) => {
      if (!connected) this.recovery?.wake.abort();
    });
    await this.client.addSetup((conn) => this.subscribe(conn));
  }

  private subscribe(conn: ChannelModel): Promise<void> {
    const run = this.subscribing.then(() => this.openSubscription(conn));
    this.subscribing = run.catch(() => undefined);
    return run;
  }

  private async openSubscription(conn: ChannelModel): Promise<void> {
    if (this.stopping || this.live?.conn === conn) return;
    this.conn = conn;
    const ch = await conn.createChannel();
    // Why the channel ended, if it did. The broker's close (or cancel) can arrive in the same
    // read as consume-ok, before the code after the await runs: it must not leave a dead
    // subscription marked live.
    let endedBy: string | undefined;
    let error: string | undefined;
    ch.on('error', (err: Error) => {
      error = err.message;
    });
    ch.on('close', () => {
      endedBy ??= error ?? 'channel closed';
      this.ended(ch, endedBy, false);
    });
    try {
      await ch.prefetch(this.options.concurrency);
      const { consumerTag } = await ch.consume(this.options.queue, (msg) => {
        if (msg) return this.dispatch(ch, msg);
        // basic.cancel from the broker (amqplib hands the callback null)
        endedBy ??= 'consumer cancelled by the broker';
        this.ended(ch, endedBy, true);
      });
      if (endedBy !== undefined) throw new Error(`subscription ended while it was set up: ${endedBy}`);
      this.live = { conn, ch, consumerTag };
    } catch (err) {
      await ch.close().catch(() => undefined);
      throw err;
    }
  }

  /** The broker ended a subscription (or stop() closed it). */
  private ended(ch: Channel, reason: string, cancelled: boolean): void {
    if (this.live?.ch !== ch) return; // still being set up, or already handled
    this.live = undefined;
    // after a cancel the channel is still open: close it, which returns its unacked messages
    if (cancelled) void ch.close().catch(() => undefined);
    if (!this.stopping) this.recover(reason);
  }

  private recover(reason: string): void {
    if (this.recovery) return; // the running one re-reads the state after each wait
    const wake = new AbortController();
    const done = this.resubscribe(reason, wake.signal).finally(() => {
      this.recovery = undefined;
    });
    this.recovery = { done, wake };
  }

  private async resubscribe(reason: string, signal: AbortSignal): Promise<void> {
    const since = Date.now();
    for (let attempts = 0; ;) {
      // The first wait also lets a closing connection report itself: its channels close
      // before it does, and then the loss is the connection's, handled by its replay.
      await pause(retryDelayMs(attempts), signal);
      const conn = this.conn;
      if (this.stopping || this.live || !conn || !this.client.isOpen(conn)) return;
      if (attempts === 0) this.logger.warn('amqp.consumer.lost', { queue: this.options.queue, reason });
      attempts += 1;
      try {
        await this.subscribe(conn);
      } catch (err) {
        this.logger.debug('amqp.consumer.resubscribe_failed', { queue: this.options.queue, attempts, err: (err as Error).message });
        continue;
      }
      if (this.live) {
        this.logger.info('amqp.consumer.recreated', { queue: this.options.queue, reason, attempts, downMs: Date.now() - since });
        return;
      }
      // ended again at once, or stopping: the checks above decide
    }
  }

  private dispatch(ch: Channel, msg: ConsumeMessage): void {
    if (this.running < this.options.concurrency) return this.startHandler(ch, msg);
    const w: Waiting = { ch, msg, timer: undefined };
    if (this.options.onOverflow) {
      w.timer = setTimeout(() => {
        const at = this.waiting.indexOf(w);
        if (at === -1) return;
        this.waiting.splice(at, 1);
        this.track(ch, msg, (delivery) => this.options.onOverflow!(parse(msg), msg).then((d) => (delivery.settle(d), d)));
      }, this.options.maxWaitMs ?? 30_000);
    }
    this.waiting.push(w);
  }

  private startHandler(ch: Channel, msg: ConsumeMessage): void {
    this.running += 1;
    this.track(
      ch,
      msg,
      (delivery) => this.options.handler(parse(msg), msg, delivery),
      () => {
        this.running -= 1;
        this.next();
      },
    );
  }

  /** Starts the oldest waiting message whose channel is still the live one (others were returned to the queue). */
  private next(): void {
    while (this.running < this.options.concurrency && this.waiting.length > 0 && !this.stopping) {
      const w = this.waiting.shift()!;
      clearTimeout(w.timer);
      if (this.live?.ch === w.ch) this.startHandler(w.ch, w.msg);
    }
  }

  /** Runs `work` for a message and settles the message once: early through the Delivery, else with what `work` returned. */
  private track(ch: Channel, msg: ConsumeMessage, work: (delivery: Delivery) => Promise<Disposition>, after?: () => void): void {
    let settled = false;
    const settle = (disposition: Disposition) => {
      if (settled) return;
      settled = true;
      // A message from a channel that has since closed or been cancelled is redelivered by
      // the broker; settling it on the dead channel would throw, so only settle it on the
      // live one (a delivery tag means nothing on any other channel).
      if (this.live?.ch !== ch) return;
      try {
        if (disposition === 'ack') ch.ack(msg);
        else ch.nack(msg, false, disposition === 'retry');
      } catch (err) {
        this.logger.warn('amqp.consumer.settle_failed', { queue: this.options.queue, err: (err as Error).message });
      }
    };
    const run = (async () => {
      let disposition: Disposition;
      try {
        disposition = await work({ settle });
      } catch (err) {
        this.logger.error('amqp.consumer.handler_failed', { queue: this.options.queue, err });
        disposition = 'retry';
      }
      settle(disposition);
    })().finally(() => after?.());
    this.inFlight.add(run);
    void run.finally(() => this.inFlight.delete(run));
  }

  /** Stops taking messages and waits for the ones in flight. Never subscribes again. */
  async stop(): Promise<void> {
    this.stopping = true;
    this.recovery?.wake.abort();
    await this.recovery?.done;
    await this.subscribing; // a replay under way ends subscribed: cancelled just below
    const live = this.live;
    if (live) await live.ch.cancel(live.consumerTag).catch(() => undefined);
    // Messages still waiting for a slot are not started. They go to onOverflow now (the worker
    // re-sends them through its delay queue and acks them): the handlers in flight may run for
    // minutes (a worker's drain waits for its running steps), and until the channel closes at
    // the end these messages would sit unacked here. Without onOverflow, closing returns them.
    for (const w of this.waiting.splice(0)) {
      clearTimeout(w.timer);
      if (this.options.onOverflow && this.live?.ch === w.ch) {
        this.track(w.ch, w.msg, (delivery) => this.options.onOverflow!(parse(w.msg), w.msg).then((d) => (delivery.settle(d), d)));
      }
    }
    await Promise.allSettled([...this.inFlight]);
    if (live) await live.ch.close().catch(() => undefined);
    this.live = undefined;
  }
}

function parse(msg: ConsumeMessage): unknown {
  try {
    return JSON.parse(msg.content.toString('utf8'));
  } catch {
    return undefined;
  }
}
