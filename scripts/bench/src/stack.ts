import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parseAllDocuments } from 'yaml';
import amqp from 'amqplib';
import { Catalog } from '@tes/catalog';
import { createDb, type Db } from '@tes/db';
import { deleteTopology, topologyNames } from '@tes/messaging';
import { ObjectStore } from '@tes/storage';
import { childPids, createTestDatabase, startEmbeddedS3, type EmbeddedS3, type TestDatabase } from '@tes/testing';
import { rssMb } from './meter';
import { RATE_LIMIT_PER_MINUTE, type BenchOptions } from './options';
import { freePort, startNode, stopChild, waitHttpOk, type Child } from './procs';

const ROOT = path.resolve(__dirname, '../../..');
const AMQP_URL = process.env.BENCH_AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672';
/** The relay's webhook retry schedule in the bench (production's starts at 1 s and spans 32 h). */
export const WEBHOOK_RETRY_DELAYS_MS = [500, 1000, 2000, 4000, 8000];
/** The relay's webhook attempt timeout (its default, set so that B9 can tell a claim's time from its lease). */
export const WEBHOOK_TIMEOUT_MS = 10_000;

/**
 * The service under test as production runs it: gateway, relay and worker from their
 * compiled dist/main.js, each a child process with NODE_ENV=production, on a database,
 * queue prefix and bucket of this run. S3 (s3rver) runs inside the harness process.
 */
export class ServiceStack {
  readonly id = randomBytes(4).toString('hex');
  readonly prefix = `bench.${this.id}.`;
  db!: Db;
  baseUrl = '';
  gateway!: Child;
  relay!: Child;
  worker: Child | undefined;
  /** VmRSS (MB) of each service right after it answered /readyz, before any load. */
  readonly startRssMb: Record<string, number> = {};
  /** When start() began: every project the run's tenants use is made after it (ids are time-ordered). */
  readonly startedAt = new Date();
  /** Each service's API (PORT), by the name it was started under. */
  readonly serviceUrl: Record<string, string> = {};
  /** Each service's health server (/metrics, /readyz). */
  readonly metricsUrl: Record<string, string> = {};
  private database: TestDatabase | undefined;

  get databaseUrl(): string {
    if (!this.database) throw new Error('the stack is not started');
    return this.database.url;
  }
  private s3: EmbeddedS3 | undefined;
  private env: Record<string, string> = {};
  private readyTimeoutMs = 30_000;

  constructor(
    private readonly logDir: string,
    private readonly options: Pick<BenchOptions, 'concurrency' | 'gatewayProcesses' | 'gatewayPoolMax'>,
    /** --cpu-prof: each service writes a .cpuprofile into the log folder when it exits. */
    private readonly cpuProf = false,
  ) {}

  /**
   * `prepare` runs on the new database before any service starts (the history of
   * `--history=N`: the relay's start-up audit then reads it, as a relay restarted in production
   * does). `readyTimeoutMs`: how long a service may take to answer /readyz (the relay audits
   * the whole ledger before it does, which takes minutes at 10 M executions).
   */
  async start(options: { prepare?: (db: Db) => Promise<void>; readyTimeoutMs?: number; database?: TestDatabase } = {}): Promise<void> {
    this.readyTimeoutMs = options.readyTimeoutMs ?? 30_000;
    this.s3 = await startEmbeddedS3();
    this.database = options.database ?? (await createTestDatabase());
    this.env = {
      NODE_ENV: 'production',
      DATABASE_URL: this.database.url,
      DB_POOL_MAX: String(this.options.gatewayPoolMax),
      AMQP_URL,
      AMQP_PREFIX: this.prefix,
      S3_ENDPOINT: this.s3.endpoint,
      S3_BUCKET: `tes-bench-${this.id}`,
      S3_ACCESS_KEY_ID: this.s3.accessKeyId,
      S3_SECRET_ACCESS_KEY: this.s3.secretAccessKey,
      ENABLE_TEST_TOOLS: '1',
      // raised, not disabled: every request still goes through the Postgres-backed limiter
      RATE_LIMIT_PER_MINUTE: String(RATE_LIMIT_PER_MINUTE),
      LOG_LEVEL: 'warn',
      WORKER_QUEUES: `test:${this.options.concurrency}`,
      SHUTDOWN_TIMEOUT_MS: '10000',
      // Executions left queued on purpose with their messages dropped (B1-B4's submits, which no
      // worker runs, and B8's idle ones) must stay queued for the whole run: with the default
      // 60 s the relay hands them back to the worker mid-run, which then works on them during
      // B5 and B7-B9. An hour is the most the config allows; nothing else reads it.
      DISPATCH_DEADLINE_MS: '3600000',
      // B9: the receiver listens on 127.0.0.1, and its retries must fit in a run
      WEBHOOK_ALLOW_PRIVATE: '1',
      WEBHOOK_RETRY_DELAYS_MS: WEBHOOK_RETRY_DELAYS_MS.join(','),
      WEBHOOK_TIMEOUT_MS: String(WEBHOOK_TIMEOUT_MS),
      AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
    };
    const store = new ObjectStore({ ...this.s3Options(), bucket: this.env.S3_BUCKET! });
    await store.ensureBucket();
    store.close();
    this.db = createDb({ url: this.database.url, poolMax: 4, applicationName: 'tes-bench' });
    await options.prepare?.(this.db);
    this.gateway = await this.startService('gateway');
    this.relay = await this.startService('relay');
  }

  private s3Options() {
    return {
      endpoint: this.env.S3_ENDPOINT!,
      publicEndpoint: this.env.S3_ENDPOINT!,
      region: 'us-east-1',
      accessKeyId: this.env.S3_ACCESS_KEY_ID!,
      secretAccessKey: this.env.S3_SECRET_ACCESS_KEY!,
    };
  }

  /**
   * One more gateway on this stack's database, queues and bucket, from another checkout's build
   * (`root`: a repository root whose services/gateway/dist is built): ab-gateway.ts runs two
   * builds side by side. Returns it with its base URL.
   */
  async startGatewayFrom(root: string, name: string, env: Record<string, string> = {}): Promise<{ child: Child; baseUrl: string }> {
    const child = await this.startService('gateway', env, { root, name });
    return { child, baseUrl: this.serviceUrl[name]! };
  }

  private async startService(
    name: 'gateway' | 'relay' | 'worker',
    env: Record<string, string> = {},
    from: { root: string; name: string } = { root: ROOT, name },
  ): Promise<Child> {
    const port = await freePort();
    const metricsPort = await freePort();
    const processes = name === 'gateway' ? this.options.gatewayProcesses : 1;
    const child = startNode(from.name, path.join(from.root, 'services', name, 'dist', 'main.js'), {
      env: {
        ...this.env,
        PORT: String(port),
        METRICS_PORT: String(metricsPort),
        NODE_OPTIONS: productionNodeOptions(name),
        // the gateway at info, as it ships: its access log (a line per request) is part of B1-B4's cost
        ...(name === 'gateway' ? { GATEWAY_PROCESSES: String(processes), LOG_LEVEL: 'info' } : {}),
        ...env,
      },
      logDir: this.logDir,
      // several gateway processes share the flags: node's default names (with the pid) keep their profiles apart
      nodeArgs: this.cpuProf ? ['--cpu-prof', `--cpu-prof-dir=${this.logDir}`, ...(processes > 1 ? [] : [`--cpu-prof-name=${from.name}.cpuprofile`])] : [],
    });
    // each process loads and connects on its own (on one pinned core with --taskset, one after another)
    await waitHttpOk(`http://127.0.0.1:${metricsPort}/readyz`, child, this.readyTimeoutMs * processes);
    this.metricsUrl[from.name] = `http://127.0.0.1:${metricsPort}`;
    this.startRssMb[from.name] = Math.max(...[child.pid, ...childPids(child.pid)].map((pid) => rssMb(pid) ?? 0));
    const url = `http://127.0.0.1:${port}`;
    this.serviceUrl[from.name] = url;
    if (from.name === 'gateway') this.baseUrl = url;
    return child;
  }

  /**
   * The relay again after its start failed (history-bench: it exits at start when its ledger
   * audit outgrows the manifest's heap), with extra environment, e.g. a larger heap.
   */
  async restartRelay(env: Record<string, string>): Promise<Child> {
    this.relay = await this.startService('relay', env);
    return this.relay;
  }

  /** The worker; `queues` is its WORKER_QUEUES (default: the test category only, at --concurrency). */
  async startWorker(queues?: string): Promise<Child> {
    this.worker = await this.startService('worker', queues ? { WORKER_QUEUES: queues } : {});
    return this.worker;
  }

  async stopWorker(): Promise<void> {
    if (this.worker) await stopChild(this.worker);
    this.worker = undefined;
  }

  /** Drops every message waiting in the test queue (submits of B3/B4, which no worker ran). */
  async purgeTestQueue(): Promise<number> {
    return this.withChannel(async (ch) => (await ch.purgeQueue(topologyNames(this.prefix).queueFor('test'))).messageCount);
  }

  private async withChannel<T>(fn: (ch: amqp.Channel) => Promise<T>): Promise<T> {
    const conn = await amqp.connect(AMQP_URL);
    try {
      const ch = await conn.createChannel();
      const out = await fn(ch);
      await ch.close();
      return out;
    } finally {
      await conn.close();
    }
  }

  /** Stops the services, then deletes the queues, the database (unless it is kept) and the S3 server. */
  async stop(): Promise<void> {
    const errors: string[] = [];
    const attempt = async (what: string, fn: () => Promise<unknown>) => {
      try {
        await fn();
      } catch (err) {
        errors.push(`${what}: ${(err as Error).message}`);
      }
    };
    // Also runs after a start that failed part-way, when some of these are still unset.
    const { gateway, relay, db } = this as Partial<Pick<ServiceStack, 'gateway' | 'relay' | 'db'>>;
    await attempt('worker', () => this.stopWorker());
    if (gateway) await attempt('gateway', () => stopChild(gateway));
    if (relay) await attempt('relay', () => stopChild(relay));
    if (db) await attempt('db pool', () => db.destroy());
    await attempt('queues', () =>
      this.withChannel((ch) => deleteTopology(ch, topologyNames(this.prefix), new Catalog({ enableTestTools: true }).categories())),
    );
    if (this.database) await attempt('database', () => this.database!.drop());
    if (this.s3) await attempt('s3', () => this.s3!.stop());
    if (errors.length) throw new Error(`cleanup: ${errors.join('; ')}`);
  }
}

/**
 * NODE_OPTIONS as production runs the service (the heap cap in the Kubernetes manifests), so
 * memory is measured under the same V8 limits: deploy/k8s/base/<name>.yaml, the image worker's
 * for the worker.
 */
function productionNodeOptions(name: 'gateway' | 'relay' | 'worker'): string {
  const file = path.join(ROOT, 'deploy/k8s/base', `${name === 'worker' ? 'worker-image' : name}.yaml`);
  for (const doc of parseAllDocuments(readFileSync(file, 'utf8'))) {
    const obj = doc.toJS() as { kind?: string; spec?: { template?: { spec?: { containers?: { env?: { name: string; value?: string }[] }[] } } } } | null;
    if (obj?.kind !== 'Deployment') continue;
    const value = obj.spec?.template?.spec?.containers?.[0]?.env?.find((e) => e.name === 'NODE_OPTIONS')?.value;
    if (value !== undefined) return value;
  }
  throw new Error(`${file} sets no NODE_OPTIONS for ${name}`);
}
