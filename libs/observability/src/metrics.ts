import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { RELEASE } from '@tes/core';

/**
 * One registry per process (tests build their own). Names carry units; labels are bounded
 * sets (route templates, status codes, tool names, states), never ids. Only counters end in
 * `_total` (`promtool check metrics` is run on a real scrape of each service in
 * tests/e2e/metrics.test.ts).
 */

/** The refusals counted in tes_http_rejections_total: the 429s by reason and the 503s. */
const REJECTION_REASONS = ['rate_limit_exceeded', 'insufficient_balance', 'monthly_cap_exceeded', 'execution_disabled', 'service_unavailable'];

/** What a provider HTTP call came to: an answer (by class) or none (network error, timeout, refused address). */
export type ProviderCallOutcome = 'ok' | 'rejected' | 'throttled' | 'server_error' | 'no_answer';

/** A connection pool's state when it is scraped (libs/db poolStats()). */
export interface DbPoolStats {
  inUse: number;
  idle: number;
  /** Queries waiting for a connection. */
  pending: number;
  max: number;
}

/**
 * prom-client's default metrics without our prefix (`nodejs_*`, `process_*`, as stock Node.js
 * dashboards expect), less its three gauges named `*_total` (a name only counters may have):
 * `nodejs_active_{handles,requests,resources}_total` are `sum without (type)` of the
 * `nodejs_active_*` gauges it exports beside them (prometheus/client_js#283).
 */
const MISNAMED_DEFAULT_GAUGES = ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total'];

export interface Metrics {
  registry: Registry;
  httpDuration: Histogram<'method' | 'route' | 'status'>;
  executionsTotal: Counter<'tool' | 'status'>;
  executionDuration: Histogram<'tool' | 'outcome'>;
  settlementDuration: Histogram<'outcome'>;
  leaseExpiries: Counter;
  outboxPublished: Counter<'source'>;
  outboxLagSeconds: Gauge;
  reservedMicrosOutstanding: Gauge;
  needsReviewCount: Gauge;
  queueDepth: Gauge<'queue'>;
  queueConsumers: Gauge<'queue'>;
  /** Executions queued (accepted, waiting for a slot) by tool category; no per-project label (cardinality). */
  queuedExecutions: Gauge<'category'>;
  /** Executions running (holding a worker slot) by tool category. */
  runningExecutions: Gauge<'category'>;
  /** Age of the oldest queued execution by tool category, by the database clock (0 when none is queued). */
  oldestQueuedAgeSeconds: Gauge<'category'>;
  ledgerAuditOk: Gauge;
  settledMicros: Counter<'tool'>;
  /** Micros of priced work not charged because the reservation was used up (the quote was too low). */
  cappedMicros: Counter<'tool'>;
  executionFailures: Counter<'tool' | 'error_code'>;
  openStreams: Gauge;
  webhookAttempts: Counter<'outcome'>;
  webhookDeliveryLag: Histogram;
  /** Rows the relay's retention deleted, by table (outbox, webhook_deliveries, rate_limits, usage_counters). */
  retentionDeleted: Counter<'table'>;
  httpRejections: Counter<'reason'>;
  /** Fair sharing of a gateway's held connections and upload slots (issue #25): resource stream, wait or upload; outcome refused or preempted. */
  fairShare: Counter<'resource' | 'outcome'>;
  providerRequests: Histogram<'provider' | 'operation' | 'outcome'>;
  dbPoolConnections: Gauge<'state'>;
  dbPoolPending: Gauge;
  dbPoolMax: Gauge;
  /** Reports a connection pool's state on every scrape (several pools are summed); returns the way to stop. */
  watchDbPool(stats: () => DbPoolStats): () => void;
  brokerConnected: Gauge;
  /** Reports whether the process holds its broker connection, on every scrape. */
  watchBroker(connected: () => boolean): void;
}

export function createMetrics(service: string, withDefaults = true): Metrics {
  const registry = new Registry();
  registry.setDefaultLabels({ service });
  if (withDefaults) {
    collectDefaultMetrics({ register: registry });
    for (const name of MISNAMED_DEFAULT_GAUGES) registry.removeSingleMetric(name);
  }
  const pools = new Set<() => DbPoolStats>();
  let broker: (() => boolean) | undefined;
  const poolTotals = (): DbPoolStats => {
    const sum: DbPoolStats = { inUse: 0, idle: 0, pending: 0, max: 0 };
    for (const stats of pools) {
      const s = stats();
      sum.inUse += s.inUse;
      sum.idle += s.idle;
      sum.pending += s.pending;
      sum.max += s.max;
    }
    return sum;
  };
  const httpRejections = new Counter({
    name: 'tes_http_rejections_total',
    help: 'Requests refused with 429 (rate_limit_exceeded, insufficient_balance, monthly_cap_exceeded) or 503 (execution_disabled: the kill switch; service_unavailable), by reason',
    labelNames: ['reason'],
    registers: [registry],
  });
  // NaN (no verdict) until an audit has run: only the relay audits, and a gauge left at its
  // default 0 in the gateway and the workers, or in a relay whose first audit has not finished,
  // would read as "an invariant is broken" to min() and page
  const ledgerAuditOk = new Gauge({
    name: 'tes_ledger_audit_ok',
    help: '1 when the last ledger audit found every money invariant intact, 0 when one was broken, NaN before any verdict (only the relay audits)',
    registers: [registry],
  });
  ledgerAuditOk.set(NaN);
  // which release each process runs, for dashboards and a rollout's progress (count by version)
  new Gauge({
    name: 'tes_build_info',
    help: 'Always 1; the labels say the release the process runs (CHANGELOG.md) and its Node.js version',
    labelNames: ['version', 'nodejs'],
    registers: [registry],
  }).set({ version: RELEASE, nodejs: process.versions.node }, 1);
  // the same for the state only the relay reads from the database: NaN until it does, so the
  // gateway and the workers never export a 0 that max() would take for "no lag, nothing
  // reserved" with every relay down (the alerts read service="relay"; max() skips a NaN)
  const relayGauge = (name: string, help: string): Gauge => {
    const gauge = new Gauge({ name, help, registers: [registry] });
    gauge.set(NaN);
    return gauge;
  };
  // every reason exported from the start at 0, so rate() and the alerts see a series before the first refusal
  for (const reason of REJECTION_REASONS) httpRejections.inc({ reason }, 0);
  const fairShare = new Counter({
    name: 'tes_fair_share_total',
    help: 'Held connections (stream, wait) and upload slots (upload) refused beyond a project, organization or process share (refused), or taken back for a project holding fewer (preempted)',
    labelNames: ['resource', 'outcome'],
    registers: [registry],
  });
  if (service === 'gateway')
    for (const resource of ['stream', 'wait', 'upload']) for (const outcome of ['refused', 'preempted']) fairShare.inc({ resource, outcome }, 0);
  return {
    registry,
    httpDuration: new Histogram({
      name: 'tes_http_request_duration_seconds',
      help: 'HTTP request latency by route template and status code',
      labelNames: ['method', 'route', 'status'],
      buckets: [0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
      registers: [registry],
    }),
    executionsTotal: new Counter({
      name: 'tes_executions_total',
      help: 'Executions that reached a state, by tool and state',
      labelNames: ['tool', 'status'],
      registers: [registry],
    }),
    executionDuration: new Histogram({
      name: 'tes_execution_duration_seconds',
      help: 'Time from acceptance to settlement, by tool and outcome',
      labelNames: ['tool', 'outcome'],
      buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900],
      registers: [registry],
    }),
    settlementDuration: new Histogram({
      name: 'tes_settlement_duration_seconds',
      help: 'Duration of the settlement transaction',
      labelNames: ['outcome'],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
      registers: [registry],
    }),
    leaseExpiries: new Counter({
      name: 'tes_lease_expiries_total',
      help: 'Executions whose worker lease expired and were handed on by the relay',
      registers: [registry],
    }),
    outboxPublished: new Counter({
      name: 'tes_outbox_published_total',
      help: 'Outbox rows published, by who published them (gateway right after commit, or relay sweep)',
      labelNames: ['source'],
      registers: [registry],
    }),
    outboxLagSeconds: relayGauge('tes_outbox_lag_seconds', 'Age of the oldest unsent outbox row (the relay reads it; NaN elsewhere)'),
    reservedMicrosOutstanding: relayGauge(
      'tes_reserved_micros_outstanding',
      'Micro-USD reserved by executions not yet settled, all projects (the relay reads it; NaN elsewhere)',
    ),
    needsReviewCount: relayGauge('tes_needs_review_executions', 'Executions waiting for an operator decision (the relay reads it; NaN elsewhere)'),
    queueDepth: new Gauge({
      name: 'tes_queue_depth',
      help: 'Messages ready for delivery in a work queue (AMQP message count; KEDA scales workers on ready + unacknowledged, read from the management API)',
      labelNames: ['queue'],
      registers: [registry],
    }),
    queueConsumers: new Gauge({
      name: 'tes_queue_consumers',
      help: 'Consumers attached to a work queue',
      labelNames: ['queue'],
      registers: [registry],
    }),
    queuedExecutions: new Gauge({
      name: 'tes_queued_executions',
      help: 'Executions accepted and waiting for a worker slot, by tool category (the database, not the broker)',
      labelNames: ['category'],
      registers: [registry],
    }),
    runningExecutions: new Gauge({
      name: 'tes_running_executions',
      help: 'Executions running, each holding a worker slot, by tool category',
      labelNames: ['category'],
      registers: [registry],
    }),
    oldestQueuedAgeSeconds: new Gauge({
      name: 'tes_oldest_queued_execution_age_seconds',
      help: 'Age of the oldest queued execution by tool category, by the database clock; 0 when none is queued',
      labelNames: ['category'],
      registers: [registry],
    }),
    ledgerAuditOk,
    settledMicros: new Counter({
      name: 'tes_settled_micros_total',
      help: 'Micro-USD charged at settlement, by tool',
      labelNames: ['tool'],
      registers: [registry],
    }),
    cappedMicros: new Counter({
      name: 'tes_charge_capped_micros_total',
      help: 'Micro-USD of priced work not charged because it exceeded what remained of the reservation (a quote below the real cost), by tool',
      labelNames: ['tool'],
      registers: [registry],
    }),
    executionFailures: new Counter({
      name: 'tes_execution_failures_total',
      help: 'Executions that ended failed, by tool and error code',
      labelNames: ['tool', 'error_code'],
      registers: [registry],
    }),
    openStreams: new Gauge({
      name: 'tes_event_streams_open',
      help: 'Execution event streams (Server-Sent Events) this process holds open',
      registers: [registry],
    }),
    webhookAttempts: new Counter({
      name: 'tes_webhook_attempts_total',
      help: 'Webhook delivery attempts by outcome: delivered, retry (will be tried again) or failed (given up)',
      labelNames: ['outcome'],
      registers: [registry],
    }),
    webhookDeliveryLag: new Histogram({
      name: 'tes_webhook_delivery_lag_seconds',
      help: 'Time from the event (the execution ending) to its successful delivery',
      buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 3600],
      registers: [registry],
    }),
    retentionDeleted: new Counter({
      name: 'tes_retention_deleted_rows_total',
      help: 'Rows of operational tables deleted past their retention horizon, by table',
      labelNames: ['table'],
      registers: [registry],
    }),
    httpRejections,
    fairShare,
    providerRequests: new Histogram({
      name: 'tes_provider_request_duration_seconds',
      help: 'Provider HTTP calls (each attempt) by provider, operation (create, poll, cancel, download) and outcome (ok, rejected = 4xx, throttled = 429, server_error = 5xx, no_answer)',
      labelNames: ['provider', 'operation', 'outcome'],
      buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300],
      registers: [registry],
    }),
    // collected on scrape from the pools watched (the gateway, worker and relay each watch their knex pool)
    dbPoolConnections: new Gauge({
      name: 'tes_db_pool_connections',
      help: 'Database pool connections by state: in_use (lent to a query or transaction) or idle',
      labelNames: ['state'],
      registers: [registry],
      collect() {
        const t = poolTotals();
        this.set({ state: 'in_use' }, t.inUse);
        this.set({ state: 'idle' }, t.idle);
      },
    }),
    dbPoolPending: new Gauge({
      name: 'tes_db_pool_pending_acquires',
      help: 'Queries waiting for a database pool connection (all in use and the pool at its maximum)',
      registers: [registry],
      collect() {
        this.set(poolTotals().pending);
      },
    }),
    dbPoolMax: new Gauge({
      name: 'tes_db_pool_max_connections',
      help: 'The most connections the database pool may open (DB_POOL_MAX)',
      registers: [registry],
      collect() {
        this.set(poolTotals().max);
      },
    }),
    watchDbPool(stats) {
      pools.add(stats);
      return () => pools.delete(stats);
    },
    // NaN until a process says how to tell (a gateway cluster's primary holds no connection)
    brokerConnected: new Gauge({
      name: 'tes_broker_connected',
      help: '1 while the process holds its AMQP connection, 0 while it is reconnecting (the gateway keeps accepting: the outbox holds the publish)',
      registers: [registry],
      collect() {
        this.set(broker ? (broker() ? 1 : 0) : NaN);
      },
    }),
    watchBroker(connected) {
      broker = connected;
    },
  };
}
