import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync, statSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import readline from 'node:readline';
import amqplib from 'amqplib';
import type { Knex } from 'knex';
import { Catalog } from '@tes/catalog';
import { loadConfig } from '@tes/config';
import { createDb } from '@tes/db';
import { deleteTopology, topologyNames } from '@tes/messaging';
import { ObjectStore } from '@tes/storage';
import { createTestDatabase, freePort, startEmbeddedS3, type EmbeddedS3, type TestDatabase } from '@tes/testing';

/**
 * The whole service as real processes: the COMPILED gateway, worker and relay
 * (services/*\/dist/main.js) as children of the test, each with its own environment, on a
 * database of their own, a queue prefix of their own and an S3 server in the test process.
 * A child can be SIGKILLed (here, or by itself at a TES_FAULT_CRASH_AT point), restarted
 * with another environment, and its output lines are kept per incarnation.
 *
 * Hazard: the children run dist/, not src/. `npm test` and `npm run test:faults` build
 * first; a direct `npx jest` after editing src would test old code, so assertFreshBuild()
 * refuses to run on a missing or stale build.
 */
export const ROOT = path.resolve(__dirname, '../..');
/**
 * Where the children's dist/ trees come from: this checkout, or FAULTS_BUILD_ROOT, a copy of
 * the built tree (libs/*, services/* with dist/, node_modules beside them) in which a bug was
 * planted on purpose to see the suite fail, without touching the shared checkout.
 */
const BUILD_ROOT = process.env.FAULTS_BUILD_ROOT ?? ROOT;
export type ServiceName = 'gateway' | 'worker' | 'relay';
export const SERVICES: readonly ServiceName[] = ['gateway', 'worker', 'relay'];
/**
 * One running copy of a service: its name, or `worker#2` for a second worker beside the
 * first (same environment, its own metrics port), so killing one leaves the other.
 */
export type Instance = ServiceName | `${ServiceName}#${number}`;
const serviceOf = (instance: Instance): ServiceName => instance.split('#')[0] as ServiceName;
const MAIN: Record<ServiceName, string> = {
  gateway: 'services/gateway/dist/main.js',
  worker: 'services/worker/dist/main.js',
  relay: 'services/relay/dist/main.js',
};
/** Every package whose dist/ the three services load. */
const BUILT = ['core', 'config', 'observability', 'db', 'messaging', 'storage', 'catalog', 'tracing']
  .map((l) => `libs/${l}`)
  .concat(SERVICES.map((s) => `services/${s}`));

function newestSource(dir: string): { file: string; mtimeMs: number } {
  let best = { file: '', mtimeMs: 0 };
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) {
      const inner = newestSource(full);
      if (inner.mtimeMs > best.mtimeMs) best = inner;
    } else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.test.ts')) {
      const m = statSync(full).mtimeMs;
      if (m > best.mtimeMs) best = { file: full, mtimeMs: m };
    }
  }
  return best;
}

/** Throws, naming the package, when a dist/ is missing or older than its src/. */
export function assertFreshBuild(): void {
  if (BUILD_ROOT !== ROOT) return; // a planted-bug copy has no src/ to compare with
  for (const pkg of BUILT) {
    const info = path.join(ROOT, pkg, 'dist', '.tsbuildinfo');
    if (!existsSync(info)) throw new Error(`${pkg}/dist is missing: run \`npx tsc -b\` first (npm test and npm run test:faults build before testing)`);
    const src = newestSource(path.join(ROOT, pkg, 'src'));
    if (src.mtimeMs > statSync(info).mtimeMs) {
      throw new Error(
        `${pkg}/dist is older than ${path.relative(ROOT, src.file)}: run \`npx tsc -b\` first (npm test and npm run test:faults build before testing)`,
      );
    }
  }
}

export { freePort };

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** The promise's value, or undefined once `ms` passed; the timer never outlives the race. */
async function within<T>(promise: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([promise, new Promise<undefined>((r) => (timer = setTimeout(() => r(undefined), ms)))]);
  } finally {
    clearTimeout(timer);
  }
}

/** GET on loopback without keep-alive (no pooled socket outlives a killed server); null when unreachable. */
export function httpStatus(url: string, timeoutMs = 1_000): Promise<number | null> {
  return new Promise((resolve) => {
    const req = http.get(url, { agent: false, timeout: timeoutMs }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? null));
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(null));
  });
}

/** A connection to the first node of AMQP_URL (one URL, or a cluster's, comma-separated) that answers. */
async function connectAny(urls: string): Promise<amqplib.ChannelModel> {
  let failure: unknown;
  for (const url of urls.split(/,(?=\s*[a-z][a-z0-9+.-]*:\/\/)/i)) {
    try {
      return await amqplib.connect(url.trim());
    } catch (err) {
      failure = err;
    }
  }
  throw failure;
}

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** One incarnation of a service: a child process and what it printed. */
export interface ServiceProcess {
  name: ServiceName;
  instance: Instance;
  child: ChildProcess;
  env: Record<string, string>;
  lines: string[];
  exit: Promise<Exit>;
  exited: Exit | undefined;
}

export interface ClusterOptions {
  /** Postgres server for createTestDatabase (default: the shared local server). */
  databaseServerUrl?: string;
  amqpUrl?: string;
  /** Extra environment for every service (providers, timings). */
  env?: Record<string, string>;
  /** Services started at once (default: all three). */
  services?: readonly ServiceName[];
}

export class Cluster {
  readonly baseUrl: string;
  /** Every incarnation of every service, oldest first (logs of killed ones included). */
  readonly history: ServiceProcess[] = [];
  private readonly current = new Map<Instance, ServiceProcess>();

  private constructor(
    readonly db: Knex,
    readonly env: Record<string, string>,
    private readonly ports: Map<Instance, { metrics: number }>,
    private readonly database: TestDatabase,
    private readonly s3: EmbeddedS3,
  ) {
    this.baseUrl = `http://127.0.0.1:${env.PORT}`;
  }

  static async start(options: ClusterOptions = {}): Promise<Cluster> {
    assertFreshBuild();
    const id = randomBytes(4).toString('hex');
    const s3 = await startEmbeddedS3();
    const database = await createTestDatabase(options.databaseServerUrl);
    const env: Record<string, string> = {
      DATABASE_URL: database.url,
      AMQP_URL: options.amqpUrl ?? process.env.TEST_AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672',
      AMQP_PREFIX: `fault.${id}.`,
      S3_ENDPOINT: s3.endpoint,
      S3_BUCKET: `tes-fault-${id}`,
      S3_ACCESS_KEY_ID: s3.accessKeyId,
      S3_SECRET_ACCESS_KEY: s3.secretAccessKey,
      // children must announce their ports: PORT=0 would hide them, so free ones are picked
      PORT: String(await freePort()),
      ENABLE_TEST_TOOLS: '1',
      LOG_LEVEL: 'info',
      LEASE_TTL_MS: '2000',
      OUTBOX_GRACE_MS: '500',
      OUTBOX_SWEEP_INTERVAL_MS: '200',
      SETTINGS_CACHE_TTL_MS: '0',
      SHUTDOWN_TIMEOUT_MS: '6000',
      RATE_LIMIT_PER_MINUTE: '100000',
      DB_POOL_MAX: '5',
      ...options.env,
    };
    const ports = new Map<Instance, { metrics: number }>();
    for (const s of SERVICES) ports.set(s, { metrics: await freePort() });
    const store = new ObjectStore(loadConfig(env).s3);
    await store.ensureBucket();
    store.close();
    const cluster = new Cluster(createDb({ url: database.url, poolMax: 4 }), env, ports, database, s3);
    try {
      await Promise.all((options.services ?? SERVICES).map((s) => cluster.start(s)));
    } catch (err) {
      // nobody else holds the cluster yet: clean up here, or children and the database leak
      await cluster.shutdown().catch(() => undefined);
      throw err;
    }
    return cluster;
  }

  readyUrl(name: Instance): string {
    return this.opsUrl(name, '/readyz');
  }

  /** The instance's Prometheus endpoint (METRICS_PORT). */
  metricsUrl(name: Instance): string {
    return this.opsUrl(name, '/metrics');
  }

  private opsUrl(name: Instance, path: string): string {
    const port = this.ports.get(name);
    if (!port) throw new Error(`${name} was never started`);
    return `http://127.0.0.1:${port.metrics}${path}`;
  }

  process(name: Instance): ServiceProcess | undefined {
    return this.current.get(name);
  }

  /** Starts a service (extra env, e.g. TES_FAULT_CRASH_AT, for this incarnation only) and waits for /readyz. */
  async start(name: Instance, extraEnv: Record<string, string> = {}, readyTimeoutMs = 30_000): Promise<ServiceProcess> {
    const running = this.current.get(name);
    if (running && !running.exited) throw new Error(`${name} is already running`);
    if (!this.ports.has(name)) this.ports.set(name, { metrics: await freePort() });
    const env: Record<string, string> = {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      HOME: process.env.HOME ?? '/tmp',
      ...this.env,
      METRICS_PORT: String(this.ports.get(name)!.metrics),
      ...extraEnv,
    };
    // the guard stops the child (SIGTERM) if this test process dies without cleaning up
    const child = spawn(
      process.execPath,
      ['--require', path.join(BUILD_ROOT, 'scripts/dev/dist/orphan-guard.js'), path.join(BUILD_ROOT, MAIN[serviceOf(name)])],
      {
        cwd: BUILD_ROOT,
        env,
        stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
      },
    );
    const proc: ServiceProcess = {
      name: serviceOf(name),
      instance: name,
      child,
      env,
      lines: [],
      exit: undefined as unknown as Promise<Exit>,
      exited: undefined,
    };
    proc.exit = new Promise<Exit>((resolve) => {
      child.once('exit', (code, signal) => {
        proc.exited = { code, signal };
        resolve(proc.exited);
      });
    });
    for (const stream of [child.stdout, child.stderr]) {
      readline.createInterface({ input: stream!, crlfDelay: Infinity }).on('line', (l) => {
        proc.lines.push(l);
        if (process.env.FAULTS_LOGS === '1') process.stdout.write(`[${name}] ${l}\n`);
      });
    }
    this.current.set(name, proc);
    this.history.push(proc);
    await this.waitReady(name, readyTimeoutMs);
    return proc;
  }

  /** Polls /readyz until 200; fails at once, with the child's last lines, if it exits. */
  async waitReady(name: Instance, timeoutMs = 30_000): Promise<number> {
    const started = Date.now();
    for (;;) {
      const proc = this.current.get(name);
      if (!proc || proc.exited) {
        throw new Error(`${name} exited (${JSON.stringify(proc?.exited)}) before it was ready:\n${proc?.lines.slice(-15).join('\n')}`);
      }
      if ((await httpStatus(this.readyUrl(name))) === 200) return Date.now() - started;
      if (Date.now() - started > timeoutMs) throw new Error(`${name} not ready after ${timeoutMs} ms:\n${proc.lines.slice(-15).join('\n')}`);
      await sleep(100);
    }
  }

  /** Waits for a service to die by itself (a crash point); throws if it is still alive. */
  async waitForExit(name: Instance, timeoutMs: number): Promise<Exit> {
    const proc = this.current.get(name);
    if (!proc) throw new Error(`${name} was never started`);
    const exit = await within(proc.exit, timeoutMs);
    if (!exit) throw new Error(`${name} did not exit within ${timeoutMs} ms:\n${proc.lines.slice(-15).join('\n')}`);
    return exit;
  }

  /** kill -9: no drain, no cleanup. */
  async kill(name: Instance): Promise<Exit | undefined> {
    const proc = this.current.get(name);
    if (!proc || proc.exited) return proc?.exited;
    proc.child.kill('SIGKILL');
    return proc.exit;
  }

  /** Graceful stop (SIGTERM: the service drains), then SIGKILL past the deadline. */
  async stop(name: Instance, deadlineMs = 15_000): Promise<Exit | undefined> {
    const proc = this.current.get(name);
    if (!proc || proc.exited) return proc?.exited;
    proc.child.kill('SIGTERM');
    const exit = await within(proc.exit, deadlineMs);
    if (exit) return exit;
    proc.child.kill('SIGKILL');
    return proc.exit;
  }

  async restart(name: Instance, extraEnv: Record<string, string> = {}): Promise<ServiceProcess> {
    await this.stop(name);
    return this.start(name, extraEnv);
  }

  /** Output lines of a service (all incarnations), for assertions on log events. */
  lines(name: ServiceName): string[] {
    return this.history.filter((p) => p.name === name).flatMap((p) => p.lines);
  }

  /** Stops every service, then removes the database, the queues and the S3 data. */
  async shutdown(): Promise<void> {
    await Promise.all([...this.current.keys()].map((s) => this.stop(s)));
    await this.db.destroy();
    const conn = await connectAny(this.env.AMQP_URL!);
    try {
      const ch = await conn.createChannel();
      await deleteTopology(
        ch,
        topologyNames(this.env.AMQP_PREFIX!, Number(this.env.WAIT_RECHECK_MS ?? 5_000)),
        new Catalog({ enableTestTools: true }).categories(),
      );
      await ch.close();
    } finally {
      await conn.close();
    }
    await this.database.drop();
    await this.s3.stop();
  }
}
