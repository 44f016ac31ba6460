import { backoffDelayMs } from '@tes/core';
import pg from 'pg';
import { KEY_CHANGES_CHANNEL } from './accounts';

export interface NotificationListenerOptions {
  url: string;
  /** A handler per channel, called with each notification's payload. */
  channels: Readonly<Record<string, (payload: string) => void>>;
  /** The connection's application_name (pg_stat_activity). */
  applicationName?: string;
  /**
   * Listening started or stopped. While not listening, changes may be missed: a cache must
   * not be trusted (and on the start after a gap, everything cached is stale).
   */
  onListening: (listening: boolean) => void;
  onError?: (err: Error) => void;
  /** First reconnect delay; doubles up to 5 s. */
  retryMs?: number;
}

/**
 * LISTENs on some channels on a connection of its own (a pooled connection cannot hold a
 * LISTEN) and reconnects with backoff when it drops. A notification is delivered when the
 * transaction that sent it commits; while the connection is down, notifications are lost, which
 * `onListening(false)` announces.
 */
export class NotificationListener {
  private client: pg.Client | undefined;
  private stopped = false;
  private timer: NodeJS.Timeout | undefined;
  /** Reconnects since the last good connection: the backoff's attempt. */
  private failures = 0;

  constructor(private readonly o: NotificationListenerOptions) {}

  /** Resolves once listening, or after the first attempt failed (it keeps retrying). */
  async start(): Promise<void> {
    await this.connect();
  }

  private async connect(): Promise<void> {
    if (this.stopped) return;
    // keepAlive: a half-open connection would otherwise look like one that is listening
    const client = new pg.Client({ connectionString: this.o.url, application_name: this.o.applicationName ?? 'tes-listener', keepAlive: true });
    let lost = false;
    const onLost = (err?: Error) => {
      if (lost) return;
      lost = true;
      if (err) this.o.onError?.(err);
      if (this.client === client) {
        this.client = undefined;
        this.o.onListening(false);
      }
      void client.end().catch(() => undefined);
      this.retry();
    };
    client.on('error', onLost);
    client.on('end', () => onLost());
    client.on('notification', (n) => {
      const handler = Object.hasOwn(this.o.channels, n.channel) ? this.o.channels[n.channel] : undefined;
      if (handler) handler(n.payload ?? '');
    });
    try {
      await client.connect();
      for (const channel of Object.keys(this.o.channels)) await client.query(`LISTEN ${pg.escapeIdentifier(channel)}`);
    } catch (err) {
      onLost(err as Error);
      return;
    }
    if (this.stopped || lost) {
      await client.end().catch(() => undefined);
      return;
    }
    this.client = client;
    this.failures = 0;
    this.o.onListening(true);
  }

  private retry(): void {
    if (this.stopped || this.timer) return;
    this.timer = setTimeout(
      () => {
        this.timer = undefined;
        void this.connect();
      },
      backoffDelayMs(this.failures++, { firstMs: this.o.retryMs ?? 200, maxMs: 5_000, jitter: 'none' }),
    );
    this.timer.unref();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    const c = this.client;
    this.client = undefined;
    if (c) await c.end().catch(() => undefined);
  }
}

/**
 * Key changes: revokeApiKey and createApiKey notify KEY_CHANGES_CHANNEL with the key's lookup id
 * when their statement commits; `onChange` forgets what is cached for it.
 */
export class KeyChangeListener extends NotificationListener {
  constructor(o: Omit<NotificationListenerOptions, 'channels'> & { onChange: (lookupId: string) => void }) {
    super({ applicationName: 'tes-key-changes', ...o, channels: { [KEY_CHANGES_CHANNEL]: o.onChange } });
  }
}
