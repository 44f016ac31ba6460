import pg from 'pg';

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
  private readonly client: pg.Client;

  constructor(
    databaseUrl: string,
    private readonly finishedSql: string,
    private readonly params: unknown[],
    private readonly limit: number,
    private readonly pollMs = 10,
  ) {
    this.client = new pg.Client({ connectionString: databaseUrl, application_name: 'tes-bench-window' });
  }

  private async read(): Promise<number> {
    const r = await this.client.query<{ n: string | null }>(this.finishedSql, this.params);
    return Number(r.rows[0]?.n ?? 0);
  }

  async start(): Promise<void> {
    await this.client.connect();
    this.finishedAtStart = await this.read();
    this.finished = this.finishedAtStart;
    const tick = async () => {
      try {
        this.finished = await this.read();
      } finally {
        if (this.timer) this.timer = setTimeout(() => void tick(), this.pollMs);
      }
    };
    this.timer = setTimeout(() => void tick(), this.pollMs);
  }

  /** Resolves when one more unit may be sent (and counts it as sent). */
  async take(): Promise<void> {
    while (this.sent - (this.finished - this.finishedAtStart) >= this.limit) await new Promise((r) => setTimeout(r, 2));
    this.sent += 1;
  }

  /** A unit that was refused (not accepted) is not outstanding. */
  giveBack(): void {
    this.sent -= 1;
  }

  async stop(): Promise<void> {
    const t = this.timer;
    this.timer = undefined;
    if (t) clearTimeout(t);
    await this.client.end().catch(() => undefined);
  }
}
