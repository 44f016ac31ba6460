import { Catalog } from '@tes/catalog';
import { dbTimeoutsFor, providerAvailability, type Config } from '@tes/config';
import { createDb, pingDb, poolStats } from '@tes/db';
import { AmqpClient, ConfirmPublisher, Consumer, topologyNames, topologySetup } from '@tes/messaging';
import { startCleanly, type StartedParts, type Stoppable } from '@tes/lifecycle';
import { createMetrics, HealthServer, type Logger } from '@tes/observability';
import { ObjectStore } from '@tes/storage';
import { GuardedHttp } from '@tes/outbound';
import { Relay } from './relay';
import { WebhookDeliverer } from './webhooks';
import { StateMetrics } from './state-metrics';
import { Retention } from './retention';

export interface RunningRelay {
  relay: Relay;
  retention: Retention;
  webhooks: WebhookDeliverer;
  metricsPort: number;
  parts: Stoppable[];
}

/** Builds and starts every part of the relay from config; a start that fails stops what it started. */
export function startRelay(config: Config, logger: Logger): Promise<RunningRelay> {
  return startCleanly((started) => buildRelay(config, logger, started), { logger, deadlineMs: config.shutdownTimeoutMs });
}

async function buildRelay(config: Config, logger: Logger, started: StartedParts): Promise<RunningRelay> {
  const metrics = createMetrics('relay');
  const db = createDb({
    url: config.databaseUrl,
    poolMax: Math.min(config.dbPoolMax, 4),
    applicationName: 'tes-relay',
    timeouts: dbTimeoutsFor(config, 'relay'),
  });
  metrics.watchDbPool(() => poolStats(db));
  started.add('db', () => db.destroy());
  const store = new ObjectStore(config.s3);
  started.add('storage', () => store.close());
  const catalog = new Catalog({ enableTestTools: config.enableTestTools, providers: providerAvailability(config), retirements: config.modelRetirements });
  const names = topologyNames(config.amqpPrefix, config.waitRecheckMs);
  const amqp = new AmqpClient({ url: config.amqpUrl, logger, name: 'tes-relay' });
  started.add('amqp', () => amqp.stop());
  await amqp.addSetup(topologySetup(names, catalog.categories()));
  const publisher = new ConfirmPublisher(amqp, names.exchange, logger);
  await publisher.start();
  await amqp.start();
  const relay = new Relay({
    db,
    publisher,
    logger,
    metrics,
    intervalMs: config.outboxSweepIntervalMs,
    graceMs: config.outboxGraceMs,
    redispatchMs: config.dispatchDeadlineMs,
    deleteObject: (key, signal) => store.delete(key, signal),
    janitorIntervalMs: config.janitorIntervalMs,
    janitorDeleteTimeoutMs: config.janitorDeleteTimeoutMs,
  });
  relay.start();
  started.add('relay', () => relay.stop());
  const { intervalMs: retentionIntervalMs, batchSize: retentionBatchSize, ...horizons } = config.retention;
  const retention = new Retention({ db, logger, metrics, horizons, intervalMs: retentionIntervalMs, batchSize: retentionBatchSize });
  retention.start();
  started.add('retention', () => retention.stop());
  const webhooks = new WebhookDeliverer({
    db,
    http: new GuardedHttp({ allowPrivateNetworks: config.webhookAllowPrivate }),
    logger,
    metrics,
    concurrency: config.webhookConcurrency,
    timeoutMs: config.webhookTimeoutMs,
    retryDelaysMs: config.webhookRetryDelaysMs,
    databaseUrl: config.databaseUrl,
  });
  webhooks.start();
  started.add('webhooks', () => webhooks.stop());
  const deadLetters = new Consumer(amqp, { queue: names.deadLetterQueue, concurrency: 1, handler: (payload) => relay.handleDeadLetter(payload) }, logger);
  started.add('dead-letters', () => deadLetters.stop());
  await deadLetters.start();
  const state = new StateMetrics({
    db,
    amqp,
    metrics,
    logger,
    queues: catalog.categories().map((c) => names.queueFor(c)),
    categories: catalog.categories(),
    intervalMs: config.stateMetricsIntervalMs,
    auditIntervalMs: config.ledgerAuditIntervalMs,
  });
  started.add('state-metrics', () => state.stop());
  await state.start();
  metrics.watchBroker(() => amqp.connected);
  const health = new HealthServer({
    port: config.metricsPort,
    registry: metrics.registry,
    checks: [() => amqp.connected, () => pingDb(db)],
  });
  const metricsPort = await health.start();
  started.add('health', () => health.stop());
  logger.info('relay.started', { intervalMs: config.outboxSweepIntervalMs, metricsPort });
  return {
    relay,
    retention,
    webhooks,
    metricsPort,
    parts: [
      { name: 'relay', stop: () => relay.stop() },
      { name: 'retention', stop: () => retention.stop() },
      { name: 'webhooks', stop: () => webhooks.stop() },
      { name: 'dead-letters', stop: () => deadLetters.stop() },
      { name: 'state-metrics', stop: () => state.stop() },
      { name: 'amqp', stop: () => amqp.stop() },
      { name: 'storage', stop: async () => store.close() },
      { name: 'health', stop: () => health.stop() },
      { name: 'db', stop: () => db.destroy() },
    ],
  };
}
