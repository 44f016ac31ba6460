import amqp, { type ChannelModel } from 'amqplib';
import type { Logger } from '@tes/observability';
import { pause, retryDelayMs } from './backoff';
import { amqpNode, UrlRotation } from './urls';

export type SetupHook = (conn: ChannelModel) => Promise<void>;

export interface AmqpClientOptions {
  /** One URL, or several nodes of a cluster comma-separated: tried in turn (urls.ts). */
  url: string;
  logger: Logger;
  /** Name shown in the broker's connection list. */
  name: string;
  /** Give up the first connection after this long (later losses retry forever). */
  initialTimeoutMs?: number;
}

/**
 * One AMQP connection per process that heals itself: when the broker goes away it
 * reconnects with capped exponential backoff and replays every setup hook (topology,
 * publisher channel, consumers) in the order they were added. A channel the broker closes
 * while the connection stays up is not this class's business: its owner re-creates it
 * (Consumer does), using isOpen() to leave a dying connection to the replay.
 */
export class AmqpClient {
  private conn: ChannelModel | undefined;
  private readonly hooks: SetupHook[] = [];
  private stopped = false;
  private reconnecting: Promise<void> | undefined;
  /** Aborted by stop(), so a reconnect does not sit out its backoff first. */
  private readonly stopSignal = new AbortController();
  /** Connections that have closed, including ones that never became current. */
  private readonly closed = new WeakSet<ChannelModel>();
  private readonly listeners = new Set<(connected: boolean) => void>();
  /** Each connect attempt takes the next node of the list. */
  private readonly urls: UrlRotation;

  constructor(private readonly options: AmqpClientOptions) {
    this.urls = new UrlRotation(options.url);
  }

  get connected(): boolean {
    return this.conn !== undefined;
  }

  /**
   * False once `conn` has closed (or the client stopped). A hook's connection may not be the
   * current one yet (hooks run before it is), so "is it still usable" is asked this way.
   * Channels close before their connection reports it, so ask after a turn of the event loop.
   */
  isOpen(conn: ChannelModel): boolean {
    return !this.stopped && !this.closed.has(conn);
  }

  /** Hooks run on every connect; a hook added after start runs at once too. */
  async addSetup(hook: SetupHook): Promise<void> {
    this.hooks.push(hook);
    if (this.conn) await hook(this.conn);
  }

  /**
   * `listener(false)` when the current connection is lost or stop() drops it, `listener(true)`
   * once a (re)connect has replayed every hook. Consumers use it to end a recovery's wait.
   */
  onConnectionChange(listener: (connected: boolean) => void): void {
    this.listeners.add(listener);
  }

  async start(): Promise<void> {
    const deadline = Date.now() + (this.options.initialTimeoutMs ?? 30_000);
    for (let attempt = 0; ; attempt++) {
      try {
        await this.connect();
        return;
      } catch (err) {
        const delay = retryDelayMs(attempt);
        if (Date.now() + delay > deadline || this.stopped) {
          throw new Error(`cannot connect to RabbitMQ at ${this.urls.describe()}: ${(err as Error).message}`, { cause: err });
        }
        await pause(delay, this.stopSignal.signal);
      }
    }
  }

  private async connect(): Promise<void> {
    const url = this.urls.next();
    const conn = await amqp.connect(url, { clientProperties: { connection_name: this.options.name } });
    conn.on('error', (err: Error) => this.options.logger.warn('amqp.connection.error', { err: err.message }));
    conn.on('close', () => {
      this.closed.add(conn);
      if (this.conn !== conn) return;
      this.conn = undefined;
      for (const l of this.listeners) l(false);
      if (!this.stopped) {
        this.options.logger.warn('amqp.connection.lost', {});
        this.reconnecting = this.reconnectLoop();
      }
    });
    try {
      for (const hook of this.hooks) await hook(conn);
    } catch (err) {
      await conn.close().catch(() => undefined);
      throw err;
    }
    this.conn = conn;
    for (const l of this.listeners) l(true);
    this.options.logger.info('amqp.connection.ready', { name: this.options.name, node: amqpNode(url) });
  }

  private async reconnectLoop(): Promise<void> {
    for (let attempt = 0; !this.stopped && !this.conn; attempt++) {
      const delay = retryDelayMs(attempt);
      await pause(delay, this.stopSignal.signal);
      if (this.stopped) return;
      try {
        await this.connect();
      } catch (err) {
        this.options.logger.warn('amqp.reconnect.failed', { err: (err as Error).message, retryInMs: retryDelayMs(attempt + 1) });
      }
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.stopSignal.abort();
    const conn = this.conn;
    this.conn = undefined;
    if (conn) {
      // the close handler ignores a connection that is no longer current: tell listeners here
      for (const l of this.listeners) l(false);
      await conn.close().catch(() => undefined);
    }
    await this.reconnecting;
  }
}
