import { Catalog, drainNeededMs, RELEASE_ALLOWANCE_MS } from '@tes/catalog';
import { dbTimeoutsFor, providerAvailability, type Config } from '@tes/config';
import { clearWorkerSlots, createDb, heartbeatWorkerSlots, reportCapabilities, pingDb, poolStats, WORKER_SLOTS_HEARTBEAT_MS } from '@tes/db';
import { AmqpClient, ConfirmPublisher, Consumer, topologyNames, topologySetup } from '@tes/messaging';
import { startCleanly, type StartedParts, type Stoppable } from '@tes/lifecycle';
import { createMetrics, HealthServer, type Logger } from '@tes/observability';
import { ObjectStore } from '@tes/storage';
import { newWorkerId, StepEngine } from './engine';
import { RUNNERS } from './tools';
import { hasProgram } from './programs';
import { GuardedHttp } from '@tes/outbound';
import { withMessageSpan, withPublishSpan } from '@tes/tracing';

export interface RunningWorker {
  workerId: string;
  metricsPort: number;
  queues: string[];
  engine: StepEngine;
  parts: Stoppable[];
}

/**
 * Starts a worker consuming the categories in WORKER_QUEUES (those the catalog knows),
 * WORKER_CONCURRENCY executions at a time per category.
 */
export function startWorker(config: Config, logger: Logger, options: { drainMs?: number } = {}): Promise<RunningWorker> {
  return startCleanly((started) => buildWorker(config, logger, options, started), { logger, deadlineMs: config.shutdownTimeoutMs });
}

/** startWorker's body; each part joins `started` as soon as it holds something, so a failed start stops it. */
async function buildWorker(config: Config, logger: Logger, options: { drainMs?: number }, started: StartedParts): Promise<RunningWorker> {
  const metrics = createMetrics('worker');
  const db = createDb({ url: config.databaseUrl, poolMax: config.dbPoolMax, applicationName: 'tes-worker', timeouts: dbTimeoutsFor(config, 'worker') });
  metrics.watchDbPool(() => poolStats(db));
  started.add('db', () => db.destroy());
  const store = new ObjectStore(config.s3);
  started.add('storage', () => store.close());
  const catalog = new Catalog({ enableTestTools: config.enableTestTools, providers: providerAvailability(config), retirements: config.modelRetirements });
  const workerId = newWorkerId();
  const names = topologyNames(config.amqpPrefix, config.waitRecheckMs);
  await reportCapabilities(db, workerId, probeCapabilities(catalog, config.workerQueues));
  const categories = config.workerQueues.filter((c) => catalog.categories().includes(c));
  const slots = Object.fromEntries(categories.map((c) => [c, config.workerConcurrencyByQueue[c] ?? config.workerConcurrency]));
  const amqp = new AmqpClient({ url: config.amqpUrl, logger, name: `tes-worker-${workerId}` });
  started.add('amqp', () => amqp.stop());
  await amqp.addSetup(topologySetup(names, catalog.categories()));
  const publisher = new ConfirmPublisher(amqp, names.exchange, logger);
  await publisher.start();
  const engine = new StepEngine({
    db,
    catalog,
    store,
    runners: RUNNERS,
    logger,
    metrics,
    leaseTtlMs: config.leaseTtlMs,
    artifactPutTimeoutMs: config.artifactPutTimeoutMs,
    workerId,
    waitMs: config.waitRecheckMs,
    projectSlotShare: config.projectSlotShare,
    slots,
    // a delayed message carries the trace on: the re-check continues the submit's trace
    publishLater: (message, category) =>
      withPublishSpan('execution.publish_later', null, (headers) =>
        publisher.publish(names.waitRoutingKey(category), message, { messageId: `later-${message.executionId}-${Date.now()}`, headers }),
      ),
    providers: {
      http: new GuardedHttp({ allowPrivateNetworks: config.providerAllowPrivateNetworks }),
      baseUrls: config.providerBaseUrls,
      credentials: { replicate: config.providers.replicateApiToken, fal: config.providers.falKey, openai: config.providers.openaiApiKey },
      jobTimeoutMs: config.providerJobTimeoutMs,
      metrics,
    },
  });
  started.add('media-sandbox', () => engine.sandbox.stop());
  const consumers = categories.map(
    (category) =>
      new Consumer(
        amqp,
        {
          queue: names.queueFor(category),
          concurrency: slots[category]!,
          handler: (payload, message, delivery) =>
            withMessageSpan('execution.process', message.properties.headers, () => engine.handle(payload, category, delivery)),
          onOverflow: (payload) => engine.deferBusy(payload, category),
        },
        logger,
      ),
  );
  // The slots this worker adds to each category, from before its first claim: a project's default
  // limit is a share of the live ones (docs/architecture.md#fair-share-of-the-worker-slots). A failed heartbeat is retried at the
  // next; meanwhile the row ages out, and the claims count this worker's own slots at worst.
  await heartbeatWorkerSlots(db, workerId, slots);
  const heartbeat = setInterval(() => {
    heartbeatWorkerSlots(db, workerId, slots).catch((err: unknown) => logger.warn('worker.slots.heartbeat_failed', { err: (err as Error).message }));
  }, WORKER_SLOTS_HEARTBEAT_MS);
  const stopHeartbeat = async () => {
    clearInterval(heartbeat);
    await clearWorkerSlots(db, workerId).catch(() => undefined);
  };
  started.add('slots', stopHeartbeat);
  started.add('consumers', async () => {
    const stopping = Promise.all(consumers.map((c) => c.stop()));
    engine.stopClaiming();
    engine.abortAll(); // a failed start has no drain time: work already taken is released to another worker
    await stopping;
  });
  for (const c of consumers) await c.start();
  await amqp.start();

  metrics.watchBroker(() => amqp.connected);
  const health = new HealthServer({
    port: config.metricsPort,
    registry: metrics.registry,
    // Not ready while any queue has no live consumer here: a channel the broker closed (its
    // ack timeout) or a cancelled consumer leaves the connection up but takes no work.
    checks: [() => amqp.connected, () => consumers.every((c) => c.consuming), () => pingDb(db)],
  });
  const metricsPort = await health.start();
  started.add('health', () => health.stop());
  const queues = categories.map((c) => names.queueFor(c));
  // Drain: stop intake and let each running step finish (its execution is then given back before
  // its next step); past drainMs, abort the steps still running (their executions are released
  // and resumed by another worker after the last completed step, so that step runs again).
  // SHUTDOWN_TIMEOUT_MS is sized per worker Deployment so that drainMs covers the categories'
  // longest step (drainNeededMs; deploy/README.md, "Rollouts and running steps").
  const drainMs = options.drainMs ?? Math.max(0, config.shutdownTimeoutMs - RELEASE_ALLOWANCE_MS);
  const neededMs = drainNeededMs(categories);
  logger.info('worker.started', {
    workerId,
    queues,
    concurrency: slots,
    metricsPort,
    drainMs,
  });
  if (drainMs < neededMs) {
    // not fatal: a rollout may abort steps that would have finished. A warning in production
    // only: development and tests run short drains on purpose
    logger.log(config.nodeEnv === 'production' ? 'warn' : 'info', 'worker.drain.short', { drainMs, neededMs, categories });
  }
  const drain = async () => {
    // no more claims after the running ones; this worker's slots stop counting toward the limits
    engine.stopClaiming();
    await stopHeartbeat();
    const stopping = Promise.all(consumers.map((c) => c.stop()));
    const timer = setTimeout(() => engine.abortAll(), drainMs);
    try {
      await stopping;
    } finally {
      clearTimeout(timer);
    }
  };

  return {
    workerId,
    metricsPort,
    queues,
    engine,
    parts: [
      { name: 'consumers', stop: drain },
      { name: 'amqp', stop: () => amqp.stop() },
      { name: 'storage', stop: async () => store.close() },
      { name: 'health', stop: () => health.stop() },
      { name: 'media-sandbox', stop: () => engine.sandbox.stop() },
      { name: 'db', stop: () => db.destroy() },
    ],
  };
}

/** Per model this worker would run: whether the programs it needs are on this machine. */
function probeCapabilities(catalog: Catalog, categories: readonly string[]) {
  const reports = [];
  for (const tool of catalog.tools.values()) {
    if (!categories.includes(tool.category)) continue;
    for (const m of tool.models) {
      const missing = (m.requires ?? []).filter((p) => !hasProgram(p));
      reports.push({ tool: tool.name, model: m.id, available: missing.length === 0, missing });
    }
  }
  return reports;
}
