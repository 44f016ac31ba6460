import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/**
 * One registry per process (tests build their own). Names carry units; labels are bounded
 * sets (route templates, status codes, tool names, states), never ids.
 */
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
  ledgerAuditOk: Gauge;
  settledMicros: Counter<'tool'>;
  executionFailures: Counter<'tool' | 'error_code'>;
  openStreams: Gauge;
  webhookAttempts: Counter<'outcome'>;
  webhookDeliveryLag: Histogram;
}

export function createMetrics(service: string, withDefaults = true): Metrics {
  const registry = new Registry();
  registry.setDefaultLabels({ service });
  if (withDefaults) collectDefaultMetrics({ register: registry, prefix: 'tes_' });
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
    outboxLagSeconds: new Gauge({
      name: 'tes_outbox_lag_seconds',
      help: 'Age of the oldest unsent outbox row',
      registers: [registry],
    }),
    reservedMicrosOutstanding: new Gauge({
      name: 'tes_reserved_micros_outstanding',
      help: 'Micro-USD reserved by executions not yet settled, all projects',
      registers: [registry],
    }),
    needsReviewCount: new Gauge({
      name: 'tes_needs_review_executions',
      help: 'Executions waiting for an operator decision',
      registers: [registry],
    }),
    queueDepth: new Gauge({
      name: 'tes_queue_depth',
      help: 'Messages ready in a work queue (KEDA scales workers on the same number)',
      labelNames: ['queue'],
      registers: [registry],
    }),
    queueConsumers: new Gauge({
      name: 'tes_queue_consumers',
      help: 'Consumers attached to a work queue',
      labelNames: ['queue'],
      registers: [registry],
    }),
    ledgerAuditOk: new Gauge({
      name: 'tes_ledger_audit_ok',
      help: '1 when the last ledger audit found every money invariant intact, 0 when one was broken',
      registers: [registry],
    }),
    settledMicros: new Counter({
      name: 'tes_settled_micros_total',
      help: 'Micro-USD charged at settlement, by tool',
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
  };
}
