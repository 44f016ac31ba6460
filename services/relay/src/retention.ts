import type { Knex } from 'knex';
import { deleteRetentionBatch, RETAINED_TABLES, type RetainedTable, type RetentionHorizons } from '@tes/db';
import type { Logger, Metrics } from '@tes/observability';

export interface RetentionOptions {
  db: Knex;
  logger: Logger;
  metrics: Pick<Metrics, 'retentionDeleted'>;
  horizons: RetentionHorizons;
  /** Time between the end of one pass and the start of the next. */
  intervalMs: number;
  /** Rows per batch (one statement, one short transaction). */
  batchSize: number;
  /**
   * Batches per table per pass (default 100). A backlog (the first pass after an upgrade, weeks
   * of outbox rows) is worked off over several passes, never in one that runs for hours.
   */
  maxBatchesPerPass?: number;
}

export type RetentionPass = Record<RetainedTable, number>;

/**
 * The relay's retention loop (libs/db retention.ts): every `intervalMs`, each operational table
 * loses its rows past their horizon, a batch at a time, until a batch comes back short. Safe in
 * several relays at once (each batch claims with SKIP LOCKED) and beside the previous release
 * (whose janitor deletes ended rate-limit windows in one statement: the same rows, also safe).
 * Passes never overlap; stop() lets the batch in flight finish and starts no other.
 */
export class Retention {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<unknown> | undefined;
  private stopped = false;

  constructor(private readonly o: RetentionOptions) {}

  start(): void {
    this.schedule();
  }

  /** One pass over every table; a table that fails is logged and the next one still runs. */
  async pass(): Promise<RetentionPass> {
    const { db, logger, metrics, horizons, batchSize } = this.o;
    const maxBatches = this.o.maxBatchesPerPass ?? 100;
    const out = Object.fromEntries(RETAINED_TABLES.map((t) => [t, 0])) as RetentionPass;
    for (const table of RETAINED_TABLES) {
      try {
        for (let i = 0; i < maxBatches && !this.stopped; i++) {
          const n = await deleteRetentionBatch(db, table, horizons, batchSize);
          out[table] += n;
          if (n > 0) metrics.retentionDeleted.inc({ table }, n);
          if (n < batchSize) break;
        }
      } catch (err) {
        logger.warn('relay.retention.failed', { table, err: (err as Error).message });
      }
    }
    if (Object.values(out).some((n) => n > 0)) logger.info('relay.retention.deleted', out);
    return out;
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.running = this.pass().finally(() => {
        this.running = undefined;
        this.schedule();
      });
    }, this.o.intervalMs);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    await this.running;
  }
}
