import type { Channel } from 'amqplib';
import type { Knex } from 'knex';
import { auditLedgerPass, categoryQueueStates, refreshLiveStatistics, repairExecutionLine, vacuumExecutionLine } from '@tes/db';
import type { AmqpClient } from '@tes/messaging';
import type { Logger, Metrics } from '@tes/observability';

/** An audit after an outage works off at most this many passes (each of bounded size) before it yields. */
const MAX_PASSES_PER_AUDIT = 50;
/** At most one ANALYZE of executions per relay in this long (refreshLiveStatistics). */
const ANALYZE_EVERY_MS = 5 * 60_000;
/** How often a relay checks and vacuums execution_line (line.ts): a minute's churn is a few thousand dead rows at 100 executions a second. */
const LINE_UPKEEP_EVERY_MS = 60_000;

export interface StateMetricsOptions {
  db: Knex;
  amqp: AmqpClient;
  metrics: Metrics;
  logger: Logger;
  /** Work queues to watch (their depth drives autoscaling). */
  queues: string[];
  /** Tool categories whose queued/running gauges are reported even at 0 (the catalog's). */
  categories?: string[];
  intervalMs: number;
  auditIntervalMs: number;
}

/**
 * Gauges of the system's state, read by the relay (one per deployment suffices; with two,
 * both report the same values): queue depth and consumers per work queue, reserved money
 * outstanding, executions waiting for an operator, queued and running executions and the oldest
 * queued age per tool category (from the database: the broker's depth says nothing of work a
 * fair claim leaves queued), and the ledger audit's verdict. The audit is
 * the incremental pass (auditLedgerPass): it reads what was written since the last pass and
 * every project's balances, so its cost follows the write rate, never the size of history; it
 * runs on its own period. With several relays one pass runs at a time and the others report
 * its verdict.
 */
export class StateMetrics {
  private channel: Channel | undefined;
  private timer: NodeJS.Timeout | undefined;
  private auditTimer: NodeJS.Timeout | undefined;
  private running: Promise<unknown> | undefined;
  private auditing: Promise<void> | undefined;
  private stopping = false;
  /** Categories reported so far: one whose line empties is set to 0, not left at its last value. */
  private readonly categories: Set<string>;
  private analyzing: Promise<void> | undefined;
  private lastAnalyzeAt = 0;
  /** Set when ANALYZE was refused (the role does not own the table): said once, not tried again. */
  private analyzeRefused = false;
  private tending: Promise<void> | undefined;
  private lastLineUpkeepAt = 0;
  /** Set when the role may not vacuum execution_line: said once, not tried again. */
  private lineVacuumRefused = false;

  constructor(private readonly o: StateMetricsOptions) {
    this.categories = new Set(o.categories ?? []);
  }

  async start(): Promise<void> {
    await this.o.amqp.addSetup(async (conn) => {
      const ch = await conn.createChannel();
      // checkQueue on a missing queue closes the channel; it is recreated on the next connect
      ch.on('error', () => undefined);
      ch.on('close', () => {
        if (this.channel === ch) this.channel = undefined;
      });
      this.channel = ch;
    });
    this.timer = setInterval(() => this.guard(() => this.collect()), this.o.intervalMs);
    this.auditTimer = setInterval(() => this.auditInBackground(), this.o.auditIntervalMs);
    await this.collect();
    // Not awaited: after an outage the first audit works off a backlog (many passes), and the
    // relay must serve its health checks (Kubernetes' startup probe) and its other jobs meanwhile.
    this.auditInBackground();
  }

  /** One audit at a time, in a slot of its own: a long catch-up does not hold back the gauges. */
  private auditInBackground(): void {
    this.auditing ??= this.audit().finally(() => (this.auditing = undefined));
  }

  private guard(fn: () => Promise<void>): void {
    if (this.running) return;
    this.running = fn().finally(() => (this.running = undefined));
  }

  async collect(): Promise<void> {
    const { db, metrics } = this.o;
    try {
      const row = await db.raw<{ rows: { reserved: number; review: number }[] }>(
        `SELECT (SELECT coalesce(sum(reserved_micros), 0) FROM projects)::bigint AS reserved,
                (SELECT count(*) FROM executions WHERE status = 'needs_review')::bigint AS review`,
      );
      metrics.reservedMicrosOutstanding.set(row.rows[0]?.reserved ?? 0);
      metrics.needsReviewCount.set(row.rows[0]?.review ?? 0);
      const states = new Map((await categoryQueueStates(db)).map((s) => [s.category, s]));
      for (const category of states.keys()) this.categories.add(category);
      for (const category of this.categories) {
        const s = states.get(category);
        metrics.queuedExecutions.set({ category }, s?.queued ?? 0);
        metrics.runningExecutions.set({ category }, s?.running ?? 0);
        metrics.oldestQueuedAgeSeconds.set({ category }, s?.oldestQueuedAgeSeconds ?? 0);
      }
      this.keepStatisticsLive([...states.values()].reduce((n, s) => n + s.queued + s.running, 0));
      this.keepLineTended();
      const ch = this.channel;
      if (ch) {
        for (const queue of this.o.queues) {
          const q = await ch.checkQueue(queue);
          metrics.queueDepth.set({ queue }, q.messageCount);
          metrics.queueConsumers.set({ queue }, q.consumerCount);
        }
      }
    } catch (err) {
      this.o.logger.warn('relay.state_metrics.failed', { err: (err as Error).message });
    }
  }

  /**
   * The planner's count of live executions follows the gauges' (refreshLiveStatistics): in the
   * background, so an ANALYZE of a large table never holds back the gauges, and at most once
   * per ANALYZE_EVERY_MS.
   */
  private keepStatisticsLive(live: number): void {
    if (this.analyzing || this.analyzeRefused || this.stopping || Date.now() - this.lastAnalyzeAt < ANALYZE_EVERY_MS) return;
    const started = Date.now();
    this.analyzing = refreshLiveStatistics(this.o.db, live)
      .then((r) => {
        if (!r.analyzed) return;
        this.lastAnalyzeAt = Date.now();
        this.o.logger.info('relay.statistics.analyzed', { table: 'executions', live, estimatedBefore: Math.round(r.estimated), ms: Date.now() - started });
      })
      .catch((err: unknown) => {
        const code = (err as { code?: string }).code;
        if (code === '42501') this.analyzeRefused = true; // insufficient_privilege: the table's owner must analyze it
        this.o.logger.warn('relay.statistics.failed', {
          err: (err as Error).message,
          ...(code === '42501'
            ? { hint: "the relay's role does not own executions: schedule ANALYZE executions, or lower its autovacuum_analyze_scale_factor" }
            : {}),
        });
      })
      .finally(() => (this.analyzing = undefined));
  }

  /**
   * execution_line's upkeep every LINE_UPKEEP_EVERY_MS, in the background like the ANALYZE: first
   * put back in step with executions where its triggers were bypassed (repairExecutionLine: a
   * stale row would hold its category; nothing to do is the normal case, anything else is
   * logged), then vacuumed (vacuumExecutionLine), so the fair claim's walk of the line steps
   * over a minute's churn at most, whatever the history and whether autovacuum runs.
   */
  private keepLineTended(): void {
    if (this.tending || this.stopping || Date.now() - this.lastLineUpkeepAt < LINE_UPKEEP_EVERY_MS) return;
    const started = Date.now();
    this.lastLineUpkeepAt = started;
    this.tending = this.tendLine(started)
      .catch((err: unknown) => void this.o.logger.warn('relay.line_upkeep.failed', { err: (err as Error).message }))
      .finally(() => (this.tending = undefined));
  }

  private async tendLine(started: number): Promise<void> {
    const repair = await repairExecutionLine(this.o.db);
    if (repair.removed.length > 0 || repair.added.length > 0) {
      this.o.logger.warn('relay.line_repaired', {
        removed: repair.removed.length,
        added: repair.added.length,
        executions: [...repair.removed, ...repair.added].slice(0, 20),
        hint: 'executions was written with its triggers bypassed (session_replication_role = replica, a disabled trigger, a replica apply)',
      });
    }
    if (this.lineVacuumRefused) return;
    const vacuum = await vacuumExecutionLine(this.o.db);
    const ms = Date.now() - started;
    if (!vacuum.vacuumed) {
      this.lineVacuumRefused = true;
      this.o.logger.warn('relay.line_vacuum.refused', {
        hint: "the relay's role may not vacuum execution_line: autovacuum keeps it (its thresholds are the table's own), or schedule VACUUM execution_line every minute",
      });
    } else if (ms > 1_000) {
      this.o.logger.info('relay.line_upkeep.slow', { ms, deadBefore: vacuum.deadBefore });
    }
  }

  /**
   * One audit: passes back to back until one reaches the horizon (after an outage the backlog is
   * worked off in passes of bounded size), then the verdict: 1 intact, 0 broken (at the first
   * pass that finds a problem), NaN when no verdict could be had.
   */
  async audit(): Promise<void> {
    try {
      for (let pass = 0; ; pass += 1) {
        const report = await auditLedgerPass(this.o.db);
        if (report.ok === false) {
          this.o.metrics.ledgerAuditOk.set(0);
          this.o.logger.error('relay.ledger_audit.failed', { problems: report.problems.slice(0, 20), problemCount: report.problemCount });
          return;
        }
        if (report.ok === true) {
          this.o.metrics.ledgerAuditOk.set(1);
          return;
        }
        // another relay audits and has no verdict yet (the gauge stays), or this one is behind
        if (!report.ran) return;
        if (this.stopping || pass >= MAX_PASSES_PER_AUDIT) {
          // still behind: no verdict (TesLedgerAuditMissing fires if that lasts)
          this.o.metrics.ledgerAuditOk.set(NaN);
          this.o.logger.warn('relay.ledger_audit.behind', { passes: pass + 1 });
          return;
        }
      }
    } catch (err) {
      // no verdict now: the last one must not stand in for audits that no longer complete
      // (TesLedgerAuditMissing fires on NaN that lasts)
      this.o.metrics.ledgerAuditOk.set(NaN);
      this.o.logger.warn('relay.ledger_audit.error', { err: (err as Error).message });
    }
  }

  async stop(): Promise<void> {
    this.stopping = true;
    if (this.timer) clearInterval(this.timer);
    if (this.auditTimer) clearInterval(this.auditTimer);
    await Promise.all([this.running, this.auditing, this.analyzing, this.tending]);
    await this.channel?.close().catch(() => undefined);
  }
}
