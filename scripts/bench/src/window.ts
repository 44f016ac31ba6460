import pg from 'pg';

/** How long the gate runs on its last count while its reads fail, before the run is called failed. */
const GIVE_UP_MS = 10_000;

/**
 * B5's capacity runs keep at most `limit` units of work outstanding (accepted and not yet
 * finished), ours and pg-boss's alike. Producers that submit as fast as they are answered
 * would otherwise build an ever-growing backlog and spend the machine's two cores on
 * submitting rather than on the work whose rate is measured, so the figure would say how
 * the cores were split between the two sides, not what the pipeline sustains.
 *
 * `finished()` reads how many units have finished so far (a cheap query: a handful of
 * counter rows); the gate re-reads it every `pollMs` and lets a producer go when
 * sent − finished-since-start < limit.
 */
export class OutstandingGate {
  private sent = 0;
  private finishedAtStart = 0;
  private finished = 0;
  private timer: NodeJS.Timeout | undefined;
  private client: pg.Client | undefined;
  /** Since when every read has failed; a gate blind for longer than GIVE_UP_MS fails the run. */
  private failingSince: number | undefined;
  private failure: Error | undefined;
  private stopped = false;

  constructor(
    private readonly databaseUrl: string,
    private readonly finishedSql: string,
    private readonly params: unknown[],
    private readonly limit: number,
    private readonly pollMs = 10,
  ) {}

  /**
   * The count, on a connection of the gate's own. A connection the server ends (a restart, a
   * terminated backend) is replaced at the next read: the run goes on with the last count read
   * meanwhile, which only holds producers back.
   */
  private async read(): Promise<number> {
    if (!this.client) {
      // bounded: a connect or a read that never answers counts as a failed read
      const client = new pg.Client({
        connectionString: this.databaseUrl,
        application_name: 'tes-bench-window',
        connectionTimeoutMillis: 2_000,
        query_timeout: 2_000,
        keepAlive: true,
      });
      // an idle connection's loss is emitted, not thrown: without a listener it would end the process
      client.on('error', () => undefined);
      await client.connect();
      if (this.stopped) {
        await client.end().catch(() => undefined);
        throw new Error('the gate is stopped');
      }
      this.client = client;
    }
    const client = this.client;
    try {
      const r = await client.query<{ n: string | null }>(this.finishedSql, this.params);
      return Number(r.rows[0]?.n ?? 0);
    } catch (err) {
      if (this.client === client) this.client = undefined;
      void client.end().catch(() => undefined);
      throw err;
    }
  }

  async start(): Promise<void> {
    this.finishedAtStart = await this.read();
    this.finished = this.finishedAtStart;
    const tick = async () => {
      try {
        this.finished = await this.read();
        this.failingSince = undefined;
      } catch (err) {
        this.failingSince ??= Date.now();
        if (Date.now() - this.failingSince > GIVE_UP_MS) this.failure ??= new Error(`the window's count cannot be read: ${(err as Error).message}`);
      } finally {
        // while reads fail, one attempt every 500 ms rather than a reconnect every pollMs
        if (this.timer) this.timer = setTimeout(() => void tick(), this.failingSince === undefined ? this.pollMs : 500);
      }
    };
    this.timer = setTimeout(() => void tick(), this.pollMs);
  }

  /** Resolves when one more unit may be sent (and counts it as sent); throws once the count has been unreadable too long. */
  async take(): Promise<void> {
    while (this.sent - (this.finished - this.finishedAtStart) >= this.limit) {
      if (this.failure) throw this.failure;
      await new Promise((r) => setTimeout(r, 2));
    }
    if (this.failure) throw this.failure;
    this.sent += 1;
  }

  /** A unit that was refused (not accepted) is not outstanding. */
  giveBack(): void {
    this.sent -= 1;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    const t = this.timer;
    this.timer = undefined;
    if (t) clearTimeout(t);
    await this.client?.end().catch(() => undefined);
    this.client = undefined;
  }
}
