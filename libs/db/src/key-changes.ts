import pg from 'pg';
import { KEY_CHANGES_CHANNEL } from './accounts';

export interface KeyChangeListenerOptions {
  url: string;
  /** A key changed (revoked, created): forget what is cached for this lookup id. */
  onChange: (lookupId: string) => void;
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
 * LISTENs on KEY_CHANGES_CHANNEL on a connection of its own (a pooled connection cannot hold a
 * LISTEN) and reconnects with backoff when it drops. Notifications are sent by revokeApiKey and
 * createApiKey when their statement commits.
 */
export class KeyChangeListener {
  private client: pg.Client | undefined;
  private stopped = false;
  private timer: NodeJS.Timeout | undefined;
  private delay: number;

  constructor(private readonly o: KeyChangeListenerOptions) {
    this.delay = o.retryMs ?? 200;
  }

  /** Resolves once listening, or after the first attempt failed (it keeps retrying). */
  async start(): Promise<void> {
    await this.connect();
  }

  private async connect(): Promise<void> {
    if (this.stopped) return;
    // keepAlive: a half-open connection would otherwise look like one that is listening
    const client = new pg.Client({ connectionString: this.o.url, application_name: 'tes-key-changes', keepAlive: true });
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
      if (n.channel === KEY_CHANGES_CHANNEL && n.payload) this.o.onChange(n.payload);
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${KEY_CHANGES_CHANNEL}`);
    } catch (err) {
      onLost(err as Error);
      return;
    }
    if (this.stopped || lost) {
      await client.end().catch(() => undefined);
      return;
    }
    this.client = client;
    this.delay = this.o.retryMs ?? 200;
    this.o.onListening(true);
  }

  private retry(): void {
    if (this.stopped || this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.connect();
    }, this.delay);
    this.timer.unref();
    this.delay = Math.min(5_000, this.delay * 2);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    const c = this.client;
    this.client = undefined;
    if (c) await c.end().catch(() => undefined);
  }
}
