import cluster, { type Worker } from 'node:cluster';
import { AggregatorRegistry, Registry, type MetricObjectWithValues, type MetricValue } from 'prom-client';

type MetricJson = MetricObjectWithValues<MetricValue<string>>;
import type { Config } from '@tes/config';
import type { Stoppable } from '@tes/lifecycle';
import { HealthServer, type Logger } from '@tes/observability';

/**
 * The gateway on several cores (GATEWAY_PROCESSES > 1): a primary that serves no request
 * itself forks that many gateway processes, which share PORT (node:cluster hands each new
 * connection to the next process). The primary owns METRICS_PORT: /metrics is the sum of
 * every process's registry (prom-client's AggregatorRegistry.aggregate), /readyz is ready
 * when every process is up and answers its own checks (broker connected, database answering).
 * Only processes that announced themselves are asked, each with a timeout, so one that is
 * still loading or hangs never stalls a scrape. A process that dies is replaced (after a
 * pause that grows while they keep dying); SIGTERM stops every process gracefully (each
 * drains its requests and publishes) and then the primary.
 */

const HELLO = 'tes:gateway:hello';
const ASK = 'tes:gateway:ask';
const ANSWER = 'tes:gateway:answer';
const ASK_TIMEOUT_MS = 2_000;

type Question = 'ready' | 'metrics';
interface Ask {
  type: typeof ASK;
  id: number;
  question: Question;
}
interface Answer {
  type: typeof ANSWER;
  id: number;
  ready?: boolean;
  metrics?: MetricJson[];
}

/**
 * In a gateway process under the primary: answer its readiness and metrics questions. Called
 * first thing at start, so a process that is still starting (or cannot start: the database
 * is down) answers "not ready" at once; `checks()` gives the checks in force (none pass
 * until the process is up).
 */
export function answerPrimary(registry: Registry, checks: () => (() => Promise<boolean> | boolean)[]): Stoppable {
  const onMessage = (message: unknown) => {
    const m = message as Partial<Ask> | null;
    if (m?.type !== ASK || typeof m.id !== 'number') return;
    const id = m.id;
    void (async () => {
      const answer: Answer = { type: ANSWER, id };
      try {
        if (m.question === 'metrics') {
          answer.metrics = await registry.getMetricsAsJSON();
        } else {
          let ok = true;
          for (const check of checks()) ok = ok && (await check());
          answer.ready = ok;
        }
      } catch {
        answer.ready = false;
      }
      if (process.connected) process.send?.(answer);
    })();
  };
  process.on('message', onMessage);
  process.send?.({ type: HELLO });
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
  let started = false;
  let stopping = false;
  /** When processes died lately: the pause before a replacement grows with them (5 minutes' memory). */
  let recentExits: number[] = [];
  let nextId = 0;
  const pending = new Map<number, (answer: Answer | undefined) => void>();
  /** Processes that announced themselves (their listener is installed). */
  const announced = new Set<number>();
  /**
   * Each live process's last metrics: a process that misses one scrape (busy past the
   * timeout) is summed with its previous values, so the sum never falls and Prometheus
   * never sees a false counter reset. Dropped when the process exits.
   */
  const lastMetrics = new Map<number, MetricJson[]>();
  // Each process must finish draining inside the primary's own deadline, or the primary's
  // stop would give up first and its exit would cut the processes off mid-drain.
  // (a process's stop may overrun its deadline by ~100 ms per part, see ShutdownCoordinator)
  const margin = Math.max(1_000, Math.min(3_000, Math.floor(config.shutdownTimeoutMs / 4)));
  const processEnv = { SHUTDOWN_TIMEOUT_MS: String(Math.max(0, config.shutdownTimeoutMs - margin)) };

  const fork = (): Worker => {
    const worker = cluster.fork(processEnv);
    worker.on('message', (message: unknown) => {
      const m = message as Partial<Answer> | { type?: unknown } | null;
      if (m?.type === HELLO) announced.add(worker.id);
      else if (m?.type === ANSWER && typeof (m as Answer).id === 'number') pending.get((m as Answer).id)?.(m as Answer);
    });
    worker.on('error', (err: Error) => logger.warn('gateway.process.ipc_error', { pid: worker.process.pid, err: err.message }));
    worker.once('exit', () => {
      announced.delete(worker.id);
      lastMetrics.delete(worker.id);
    });
    return worker;
  };

  // Replaces a process that died once the cluster is up (during start, a death fails the start).
  cluster.on('exit', (worker, code, signal) => {
    if (stopping || !started) return;
    const now = Date.now();
    recentExits = [...recentExits.filter((t) => now - t < 300_000), now];
    const delayMs = Math.min(30_000, 250 * 2 ** Math.min(recentExits.length - 1, 7));
    logger.error('gateway.process.exited', { pid: worker.process.pid, code, signal, restartInMs: delayMs });
    setTimeout(() => {
      if (!stopping) fork().once('listening', () => logger.info('gateway.process.replaced', { exitsInFiveMinutes: recentExits.length }));
    }, delayMs).unref();
  });

  // Start: every process must come up (it listens on PORT once its database, broker and
  // settings are reachable); one that exits first fails the start, as a single process would.
  const first = Array.from({ length: wanted }, () => fork());
  await Promise.all(
    first.map(
      (worker) =>
        new Promise<void>((resolve, reject) => {
          const onExit = (code: number | null, signal: string | null) =>
            reject(new Error(`gateway process ${worker.process.pid} exited during start (${signal ?? code})`));
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
  started = true;
  // a process that died between its 'listening' and now is replaced like any other
  for (let i = Object.values(cluster.workers ?? {}).filter((w) => w && !w.isDead()).length; i < wanted; i++) fork();

  /** Asks every announced process; an answer that does not come within ASK_TIMEOUT_MS is undefined. */
  const askAll = (question: Question): Promise<{ workerId: number; answer: Answer | undefined }[]> => {
    const workers = Object.values(cluster.workers ?? {}).filter((w): w is Worker => w !== undefined && w.isConnected() && announced.has(w.id));
    return Promise.all(
      workers.map(
        (worker) =>
          new Promise<{ workerId: number; answer: Answer | undefined }>((resolve) => {
            const id = nextId++;
            const settle = (answer: Answer | undefined) => {
              clearTimeout(timer);
              pending.delete(id);
              resolve({ workerId: worker.id, answer });
            };
            const timer = setTimeout(() => settle(undefined), ASK_TIMEOUT_MS);
            pending.set(id, settle);
            // a process that died a moment ago may still look connected: a failed send is a
            // missing answer, never an unhandled 'error' that would take the primary down
            worker.send({ type: ASK, id, question } satisfies Ask, (err: Error | null) => {
              if (err) settle(undefined);
            });
          }),
      ),
    );
  };
  const allReady = async (): Promise<boolean> => {
    const answers = await askAll('ready');
    return answers.length >= wanted && answers.every((a) => a.answer?.ready === true);
  };
  const summedMetrics = async (): Promise<string> => {
    for (const { workerId, answer } of await askAll('metrics')) {
      if (Array.isArray(answer?.metrics)) lastMetrics.set(workerId, answer.metrics);
    }
    const each = [...lastMetrics.values()];
    return each.length > 0 ? AggregatorRegistry.aggregate(each).metrics() : '';
  };
  const health = new HealthServer({
    port: config.metricsPort,
    registry: { metrics: summedMetrics, contentType: Registry.PROMETHEUS_CONTENT_TYPE },
    checks: [allReady],
  });
  const metricsPort = await health.start();
  logger.info('gateway.cluster.started', { processes: wanted, port: config.port, metricsPort, pids: first.map((w) => w.process.pid) });

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
