import { Catalog } from '@tes/catalog';
import { providerAvailability, type Config } from '@tes/config';
import { createDb, pingDb } from '@tes/db';
import { AmqpClient, ConfirmPublisher, Consumer, topologyNames, topologySetup } from '@tes/messaging';
import { createMetrics, HealthServer, type Logger, type Stoppable } from '@tes/observability';
import { ObjectStore } from '@tes/storage';
import { Relay } from './relay';
import { StateMetrics } from './state-metrics';

export interface RunningRelay {
  relay: Relay;
  metricsPort: number;
  parts: Stoppable[];
}

export async function startRelay(config: Config, logger: Logger): Promise<RunningRelay> {
  const metrics = createMetrics('relay');
  const db = createDb({ url: config.databaseUrl, poolMax: Math.min(config.dbPoolMax, 4), applicationName: 'tes-relay' });
  const store = new ObjectStore(config.s3);
  const catalog = new Catalog({ enableTestTools: config.enableTestTools, providers: providerAvailability(config) });
  const names = topologyNames(config.amqpPrefix, config.waitRecheckMs);
  const amqp = new AmqpClient({ url: config.amqpUrl, logger, name: 'tes-relay' });
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
    routingKeyFor: (c) => c,
    redispatchMs: config.dispatchDeadlineMs,
    deleteObject: (key) => store.delete(key),
    janitorIntervalMs: config.janitorIntervalMs,
  });
  relay.start();
  const deadLetters = new Consumer(amqp, { queue: names.deadLetterQueue, concurrency: 1, handler: (payload) => relay.handleDeadLetter(payload) }, logger);
  await deadLetters.start();
  const state = new StateMetrics({
    db,
    amqp,
    metrics,
    logger,
    queues: catalog.categories().map((c) => names.queueFor(c)),
    intervalMs: config.stateMetricsIntervalMs,
    auditIntervalMs: config.ledgerAuditIntervalMs,
  });
  await state.start();
  const health = new HealthServer({
    port: config.metricsPort,
    registry: metrics.registry,
    checks: [() => amqp.connected, () => pingDb(db)],
  });
  const metricsPort = await health.start();
  logger.info('relay.started', { intervalMs: config.outboxSweepIntervalMs, metricsPort });
  return {
    relay,
    metricsPort,
    parts: [
      { name: 'relay', stop: () => relay.stop() },
      { name: 'dead-letters', stop: () => deadLetters.stop() },
      { name: 'state-metrics', stop: () => state.stop() },
      { name: 'amqp', stop: () => amqp.stop() },
      { name: 'storage', stop: async () => store.close() },
      { name: 'health', stop: () => health.stop() },
      { name: 'db', stop: () => db.destroy() },
    ],
  };
}
