import { openSharedParts } from '@tes/boot';
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { type Config } from '@tes/config';
import { KeyChangeListener, markOutboxPublished, pingDb } from '@tes/db';
import { OutboxDispatcher } from '@tes/messaging';
import { startCleanly, type StartedParts, type Stoppable } from '@tes/lifecycle';
import { createMetrics, HealthServer, type Logger } from '@tes/observability';
import { answerPrimary } from './cluster';
import { createApp } from './app';
import { answerClientError, answerUnmetExpectation } from './client-errors';
import { SettingsCache } from './settings-cache';
import { KeyCache } from './key-cache';
import { UsageCounter } from './usage-counter';
import { ChangeHub } from './push/change-hub';
import { HeldConnections } from './push/held-connections';

/**
 * How long a stopping gateway lets connections with no request in flight send one (a head on
 * its way) before it closes them; then a drain still waiting logs what for (gateway.drain.waiting).
 */
const DRAIN_GRACE_MS = 1_000;

export interface RunningGateway {
  port: number;
  metricsPort: number;
  /** Parts in shutdown order: intake, in-flight publishes, broker, storage, database. */
  parts: Stoppable[];
}

export interface GatewayOptions {
  /**
   * Run as one of several processes under a cluster primary (cluster.ts): no operations
   * server of its own; the primary asks it for its metrics and readiness over IPC.
   */
  clusterWorker?: boolean;
}

/** Builds and starts every part of the gateway from config (used by main.ts and tests); a start that fails stops what it started. */
export function startGateway(config: Config, logger: Logger, options: GatewayOptions = {}): Promise<RunningGateway> {
  return startCleanly((started) => buildGateway(config, logger, options, started), { logger, deadlineMs: config.shutdownTimeoutMs });
}

/** startGateway's body; each part joins `started` as soon as it holds something, so a failed start stops it. */
async function buildGateway(config: Config, logger: Logger, options: GatewayOptions, started: StartedParts): Promise<RunningGateway> {
  const metrics = createMetrics('gateway');
  // Under a cluster primary, answer it from the first moment (not ready until started).
  let readiness: (() => Promise<boolean> | boolean)[] = [() => false];
  const ipc = options.clusterWorker ? answerPrimary(metrics.registry, () => readiness) : undefined;
  if (ipc) started.add(ipc.name, () => ipc.stop());
  const { db, store, catalog, amqp, publisher } = await openSharedParts(config, logger, metrics, started, { role: 'gateway', poolMax: config.dbPoolMax });
  await amqp.start();
  const dispatcher = new OutboxDispatcher(
    publisher,
    (ids) => markOutboxPublished(db, ids),
    logger,
    (n) => metrics.outboxPublished.inc({ source: 'gateway' }, n),
  );
  const settings = new SettingsCache(db, config.settingsCacheTtlMs);
  await settings.get(); // fails fast when the database is unreachable or unmigrated

  const keys = new KeyCache(db, config.authCacheTtlMs);
  // revocations reach this process as they commit (see KeyCache)
  const keyChanges = new KeyChangeListener({
    url: config.databaseUrl,
    onChange: (lookupId) => keys.forget(lookupId),
    onListening: (on) => {
      keys.listening = on;
      logger.info(on ? 'gateway.key_changes.listening' : 'gateway.key_changes.lost', {});
    },
    onError: (err) => logger.warn('gateway.key_changes.error', { err: err.message }),
  });
  started.add('key-changes', () => keyChanges.stop());
  await keyChanges.start();
  const usage = new UsageCounter(db, logger, config.usageFlushIntervalMs);
  usage.start();
  started.add('usage', () => usage.stop());
  const changes = new ChangeHub({ db, databaseUrl: config.databaseUrl, logger });
  started.add('push', () => changes.stop());
  await changes.start();
  const held = new HeldConnections(config.heldConnections, (resource, outcome) => metrics.fairShare.inc({ resource, outcome }));
  const app = createApp({ config, db, catalog, store, dispatcher, settings, keys, usage, logger, metrics, changes, held });
  // Every answer carries the envelope, also those Node would write itself: requests its
  // parser refuses, an unmet Expect, and (requireHostHeader: false, app.ts answers instead)
  // an HTTP/1.1 request without Host.
  const server = http.createServer({ requireHostHeader: false }, app);
  server.on('clientError', answerClientError(logger));
  server.on('checkExpectation', answerUnmetExpectation(logger));
  server.keepAliveTimeout = 65_000;
  // Stopping, each connection is closed once its answer is out. server.close() closes only the
  // connections idle at that moment; a client that keeps its connection busy (a load balancer's
  // pool, a console page's polling, an event stream reconnecting) would hold the stop until its
  // deadline, answered all the while. So a request that arrives meanwhile is answered with
  // Connection: close, and idle connections are closed again every 50 ms until the last one
  // is gone (an answer sent before its request's body was read is idle only once the body is in).
  // Node does not count as idle a connection that has not sent a whole request: a browser's
  // preconnected socket (Chromium opens them ahead of need) or a request's head still on its
  // way. Those held a console page's gateway until its deadline; after DRAIN_GRACE_MS every
  // connection with no request in flight is closed, and no answer is cut.
  let draining = false;
  const inFlight = new Set<http.IncomingMessage>();
  const sockets = new Set<Socket>();
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  server.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
    if (draining) res.shouldKeepAlive = false;
    inFlight.add(req);
    res.on('close', () => inFlight.delete(req));
  });
  const closeUnused = (): number => {
    const busy = new Set([...inFlight].map((r) => r.socket));
    let closed = 0;
    for (const socket of sockets)
      if (!busy.has(socket)) {
        socket.destroy();
        closed += 1;
      }
    return closed;
  };
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.port, () => resolve());
  });
  started.add('http', () => {
    server.close();
    server.closeAllConnections();
  });
  const port = (server.address() as AddressInfo).port;

  // Ready = can serve: the database is the truth and the outbox carries every publish, so a
  // broker outage degrades the gateway (messages wait in the outbox; the dispatcher and the
  // relay's sweep send them when it is back) but does not take it out of its Service: with the
  // broker in the checks, every gateway left the load balancer while it still accepted work.
  const checks = [() => pingDb(db)];
  metrics.watchBroker(() => amqp.connected);
  let health: Stoppable;
  let metricsPort = 0;
  if (ipc) {
    readiness = checks;
    health = ipc;
  } else {
    const server = new HealthServer({ port: config.metricsPort, registry: metrics.registry, checks, degraded: { broker: () => amqp.connected } });
    metricsPort = await server.start();
    started.add('health', () => server.stop());
    health = { name: 'health', stop: () => server.stop() };
  }
  logger.info('gateway.started', { port, metricsPort, pid: process.pid });

  return {
    port,
    metricsPort,
    parts: [
      // first: waiting requests answer with the state they have, streams end (clients resume
      // elsewhere with Last-Event-ID), so the server's close below does not wait for them
      { name: 'push', stop: () => changes.stop() },
      {
        name: 'http',
        stop: () =>
          new Promise<void>((resolve) => {
            draining = true;
            const sweep = setInterval(() => server.closeIdleConnections(), 50).unref();
            const grace = setTimeout(() => {
              const closed = closeUnused();
              if (closed > 0) logger.info('gateway.drain.closed_unused', { connections: closed });
              // still waiting: answers in flight (a slow upload, a download), named
              if (inFlight.size > 0)
                logger.warn('gateway.drain.waiting', {
                  afterMs: DRAIN_GRACE_MS,
                  closedWithoutRequest: closed,
                  // method and path: no query, no key
                  requests: [...inFlight].slice(0, 20).map((r) => `${r.method} ${(r.url ?? '').split('?')[0]}`),
                });
            }, DRAIN_GRACE_MS).unref();
            server.close(() => {
              clearInterval(sweep);
              clearTimeout(grace);
              resolve();
            });
            server.closeIdleConnections();
          }),
      },
      { name: 'dispatcher', stop: () => dispatcher.stop() },
      { name: 'usage', stop: () => usage.stop() },
      { name: 'key-changes', stop: () => keyChanges.stop() },
      { name: 'amqp', stop: () => amqp.stop() },
      { name: 'storage', stop: async () => store.close() },
      health,
      { name: 'db', stop: () => db.destroy() },
    ],
  };
}
