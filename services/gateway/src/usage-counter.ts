import type { Knex } from 'knex';
import { countRequests } from '@tes/db';
import type { Logger } from '@tes/observability';

/**
 * Counts requests per project in memory and writes them in one statement per interval, so a
 * request costs no database write for its usage count. The count reported by
 * GET /tools/usage lags by at most one interval; stop() writes what is left.
 */
export class UsageCounter {
  private pending = new Map<string, number>();
  private timer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> | undefined;

  constructor(
    private readonly db: Knex,
    private readonly logger: Logger,
    private readonly intervalMs: number,
  ) {}

  start(): void {
    this.timer = setInterval(() => void this.flush(), this.intervalMs);
    this.timer.unref();
  }

  count(projectId: string): void {
    this.pending.set(projectId, (this.pending.get(projectId) ?? 0) + 1);
  }

  async flush(): Promise<void> {
    await this.flushing;
    if (this.pending.size === 0) return;
    const batch = this.pending;
    this.pending = new Map();
    this.flushing = countRequests(this.db, batch).catch((err: unknown) => {
      // put them back: counted on the next flush rather than lost
      for (const [p, n] of batch) this.pending.set(p, (this.pending.get(p) ?? 0) + n);
      this.logger.warn('gateway.usage.flush_failed', { err: (err as Error).message });
    });
    await this.flushing;
    this.flushing = undefined;
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    await this.flush();
  }
}
