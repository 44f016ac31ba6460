import cluster, { type Worker } from 'node:cluster';
import { AggregatorRegistry, type Registry } from 'prom-client';
import type { Config } from '@tes/config';
import { HealthServer, type Logger, type Stoppable } from '@tes/observability';

/**
 * The gateway on several cores (GATEWAY_PROCESSES > 1): a primary that serves no request
 * itself forks that many gateway processes, which share PORT (node:cluster hands each new
 * connection to the next process). The primary owns METRICS_PORT: /metrics is the sum of
 * every process's registry (prom-client's AggregatorRegistry), /readyz is ready when every
 * process is up and answers its own checks (broker connected, database answering).
 * A process that dies is replaced (after a pause that grows while they keep dying); SIGTERM
 * stops every process gracefully (each drains its requests and publishes) and then the
 * primary.
 */

const READY_REQUEST = 'tes:gateway:ready?';
const READY_ANSWER = 'tes:gateway:ready';
const READY_TIMEOUT_MS = 2_000;

interface ReadyAnswer {
  type: typeof READY_ANSWER;
  id: number;
  ok: boolean;
}

/** In a gateway process under the primary: answer its metrics and readiness questions. */
export function answerPrimary(registry: Registry, checks: Array<() => Promise<boolean> | boolean>): Stoppable {
  AggregatorRegistry.setRegistries([registry]);
  // constructing one installs prom-client's listener for the primary's metrics requests
  new AggregatorRegistry();
  const onMessage = (message: unknown) => {
    const m = message as { type?: unknown; id?: unknown } | null;
    if (m?.type !== READY_REQUEST || typeof m.id !== 'number') return;
    const id = m.id;
    void (async () => {
      let ok = true;
      try {
        for (const check of checks) ok = ok && (await check());
      } catch {
        ok = false;
      }
      if (process.connected) process.send?.({ type: READY_ANSWER, id, ok } satisfies ReadyAnswer);
    })();
  };
  process.on('message', onMessage);
  // A primary that dies (SIGKILL) leaves no orphans: node's cluster makes a worker whose IPC
  // channel closes unexpectedly exit at once (lib/internal/cluster/child.js).
  return {
    name: 'cluster-ipc',
    stop: async () => {
      process.off('message', onMessage);
    },
  };
}

/** In the primary: fork the gateway processes and serve the operations port for all of them. */
export async function startGatewayCluster(config: Config, logger: Logger): Promise<{ parts: Stoppable[] }> {
  const wanted = config.gatewayProcesses;
  let stopping = false;
  let restarts = 0;
  let nextId = 0;
  const pendingReady = new Map<number, (ok: boolean) => void>();

  const fork = (): Worker => {
    const worker = cluster.fork();
    worker.on('message', (message: unknown) => {
      const m = message as Partial<ReadyAnswer> | null;
      if (m?.type === READY_ANSWER && typeof m.id === 'number') pendingReady.get(m.id)?.(m.ok === true);
    });
    return worker;
  };

  // Start: every process must come up (it listens on PORT once its database, broker and
  // settings are reachable); one that exits first fails the start, as a single process would.
  const started = Array.from({ length: wanted }, () => fork());
  await Promise.all(
    started.map(
      (worker) =>
        new Promise<void>((resolve, reject) => {
          const onExit = (code: number | null, signal: string | null) => reject(new Error(`gateway process ${worker.process.pid} exited during start (${signal ?? code})`));
          worker.once('exit', onExit);
          worker.once('listening', () => {
            worker.off('exit', onExit);
            resolve();
          });
        }),
    ),
  ).catch((err: unknown) => {
    stopping = true;
    for (const w of Object.values(cluster.workers ?? {})) w?.process.kill('SIGTERM');
    throw err;
  });

  cluster.on('exit', (worker, code, signal) => {
    if (stopping) return;
    restarts += 1;
    const delayMs = Math.min(30_000, 250 * 2 ** Math.min(restarts - 1, 7));
    logger.error('gateway.process.exited', { pid: worker.process.pid, code, signal, restartInMs: delayMs });
    setTimeout(() => {
      if (!stopping) fork().once('listening', () => logger.info('gateway.process.replaced', { restarts }));
    }, delayMs).unref();
  });

  const aggregator = new AggregatorRegistry();
  const allReady = async (): Promise<boolean> => {
    const workers = Object.values(cluster.workers ?? {}).filter((w): w is Worker => w !== undefined && w.isConnected());
    if (workers.length < wanted) return false;
    const answers = workers.map(
      (worker) =>
        new Promise<boolean>((resolve) => {
          const id = nextId++;
          const timer = setTimeout(() => settle(false), READY_TIMEOUT_MS);
          const settle = (ok: boolean) => {
            clearTimeout(timer);
            pendingReady.delete(id);
            resolve(ok);
          };
          pendingReady.set(id, settle);
          worker.send({ type: READY_REQUEST, id });
        }),
    );
    return (await Promise.all(answers)).every(Boolean);
  };
  const health = new HealthServer({
    port: config.metricsPort,
    registry: { metrics: () => aggregator.clusterMetrics(), contentType: aggregator.contentType },
    checks: [allReady],
  });
  const metricsPort = await health.start();
  logger.info('gateway.cluster.started', { processes: wanted, port: config.port, metricsPort, pids: started.map((w) => w.process.pid) });

  return {
    parts: [
      {
        // each process stops its intake, drains requests and publishes, then exits
        name: 'gateway-processes',
        stop: async () => {
          stopping = true;
          const workers = Object.values(cluster.workers ?? {}).filter((w): w is Worker => w !== undefined);
          await Promise.all(
            workers.map(
              (w) =>
                new Promise<void>((resolve) => {
                  if (w.isDead()) return resolve();
                  w.once('exit', () => resolve());
                  w.process.kill('SIGTERM');
                }),
            ),
          );
        },
      },
      { name: 'health', stop: () => health.stop() },
    ],
  };
}
