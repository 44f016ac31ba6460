import { randomBytes } from 'node:crypto';
import type { Knex } from 'knex';
import supertest from 'supertest';
import winston from 'winston';
import type Transport from 'winston-transport';
import { loadConfig, type Config } from '@tes/config';
import { auditLedger, createDb, type AuditReport } from '@tes/db';
import { AmqpClient, deleteTopology, topologyNames } from '@tes/messaging';
import { startCleanly, stopInOrder, StopOverrun, type StartedParts, type Stoppable } from '@tes/lifecycle';
import { createLogger, type Logger } from '@tes/observability';
import { ObjectStore } from '@tes/storage';
import {
  CaptureTransport,
  loadOpenApi,
  OpenApiValidator,
  createTestDatabase,
  seedProject,
  startEmbeddedS3,
  type SeededProject,
  type TestDatabase,
  type EmbeddedS3,
} from '@tes/testing';
import { Catalog } from '@tes/catalog';
import { startGateway } from '../services/gateway/src/server';
import { startWorker, type RunningWorker } from '../services/worker/src/server';
import { startRelay, type RunningRelay } from '../services/relay/src/server';

export interface TestStack {
  config: Config;
  /** A pool of the test's own, for assertions against the database. */
  db: Knex;
  baseUrl: string;
  /** The gateway's /metrics, /healthz, /readyz port (worker and relay: stack.worker/relay.metricsPort). */
  gatewayMetricsPort: number;
  logs: CaptureTransport;
  logger: Logger;
  worker: RunningWorker | undefined;
  relay: RunningRelay | undefined;
  http(): supertest.Agent;
  seed(options?: Parameters<typeof seedProject>[1]): Promise<SeededProject>;
  audit(): Promise<AuditReport>;
  startWorker(env?: Record<string, string>): Promise<RunningWorker>;
  stopWorker(): Promise<void>;
  stop(): Promise<void>;
}

export interface StackOptions {
  worker?: boolean;
  relay?: boolean;
  env?: Record<string, string>;
}

/**
 * The whole service in this process, on real infrastructure over sockets: a fresh
 * Postgres database, a queue prefix of its own on the local RabbitMQ, an S3 server with
 * signature checks and a bucket of its own. A start that fails part-way stops what it had
 * started, and stop() stops everything, newest first (the worker, the relay, the gateway,
 * then the test's pool, the queues, the database and S3).
 */
export function startStack(options: StackOptions = {}): Promise<TestStack> {
  return startCleanly((started) => buildStack(options, started));
}

async function buildStack(options: StackOptions, started: StartedParts): Promise<TestStack> {
  const id = randomBytes(4).toString('hex');
  const s3: EmbeddedS3 = await startEmbeddedS3();
  started.add('s3', () => s3.stop());
  const database: TestDatabase = await createTestDatabase();
  started.add('database', () => database.drop());
  const env: Record<string, string> = {
    DATABASE_URL: database.url,
    AMQP_URL: process.env.TEST_AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672',
    AMQP_PREFIX: `test.${id}.`,
    S3_ENDPOINT: s3.endpoint,
    S3_BUCKET: `tes-test-${id}`,
    S3_ACCESS_KEY_ID: s3.accessKeyId,
    S3_SECRET_ACCESS_KEY: s3.secretAccessKey,
    PORT: '0',
    METRICS_PORT: '0',
    ENABLE_TEST_TOOLS: '1',
    LOG_LEVEL: 'debug',
    SETTINGS_CACHE_TTL_MS: '0',
    // short, so revocations are seen within a test, but the key cache is still on the path
    AUTH_CACHE_TTL_MS: '300',
    USAGE_FLUSH_INTERVAL_MS: '50',
    OUTBOX_SWEEP_INTERVAL_MS: '200',
    OUTBOX_GRACE_MS: '1000',
    LEASE_TTL_MS: '5000',
    SHUTDOWN_TIMEOUT_MS: '10000',
    ...options.env,
  };
  const config = loadConfig(env);
  const logs = new CaptureTransport();
  const transports: Transport[] = [logs];
  // TEST_LOGS=1 also prints every record, for debugging a failing test.
  if (process.env.TEST_LOGS === '1') transports.push(new winston.transports.Console());
  const logger = createLogger({ service: 'test', level: 'debug', transports });
  const store = new ObjectStore(config.s3);
  try {
    await store.ensureBucket();
  } finally {
    store.close();
  }
  // the services declare the stack's queues as they start: removed once they are stopped
  started.add('queues', () => deleteStackTopology(config, logger));
  const db = createDb({ url: database.url, poolMax: 5 });
  started.add('db', () => db.destroy());

  const gateway = await startGateway(config, logger);
  started.add('gateway', () => stopService('gateway', gateway.parts, config.shutdownTimeoutMs));
  let relay: RunningRelay | undefined;
  if (options.relay !== false) {
    const r = await startRelay(config, logger);
    started.add('relay', () => stopService('relay', r.parts, config.shutdownTimeoutMs));
    relay = r;
  }
  let stopping: Promise<void> | undefined;
  const stack: TestStack = {
    config,
    db,
    baseUrl: `http://127.0.0.1:${gateway.port}`,
    gatewayMetricsPort: gateway.metricsPort,
    logs,
    logger,
    worker: undefined,
    relay,
    http: () => validatingAgent(`http://127.0.0.1:${gateway.port}`),
    seed: (o) => seedProject(db, o),
    audit: () => auditLedger(db),
    startWorker: async (extra = {}) => {
      const w = await startWorker(loadConfig({ ...env, ...extra }), logger);
      stack.worker = w;
      return w;
    },
    stopWorker: async () => {
      const w = stack.worker;
      stack.worker = undefined;
      if (w) for (const p of w.parts) await p.stop();
    },
    stop: () =>
      (stopping ??= (async () => {
        await stack.stopWorker();
        // everything is stopped even when a step fails; then the first failure is the test's
        const failures: Error[] = [];
        await started.stopAll(60_000, (part, err) => failures.push(new Error(`stopping the test stack's ${part} failed`, { cause: err })));
        if (failures[0]) throw failures[0];
      })()),
  };
  // the worker is the newest part: stopped first
  started.add('worker', () => stack.stopWorker());
  if (options.worker !== false) await stack.startWorker();
  return stack;
}

/**
 * A service's parts in its own shutdown order, within the deadline SIGTERM gives it: a part that
 * throws does not keep the others running (a test may have broken it on purpose), and a part that
 * overruns fails the stop by name, as it would fail the service's shutdown in production.
 */
async function stopService(service: string, parts: Stoppable[], deadlineMs: number): Promise<void> {
  const overruns: string[] = [];
  await stopInOrder(parts, deadlineMs, (part, err) => {
    if (err instanceof StopOverrun) overruns.push(`${service} part '${part}' ${err.message}`);
  });
  if (overruns.length > 0) throw new Error(`${overruns.join('; ')} (its shutdown deadline is ${deadlineMs} ms)`);
}

async function deleteStackTopology(config: Config, logger: Logger): Promise<void> {
  const amqp = new AmqpClient({ url: config.amqpUrl, logger, name: 'test-cleanup' });
  await amqp.addSetup(async (conn) => {
    const ch = await conn.createChannel();
    await deleteTopology(ch, topologyNames(config.amqpPrefix, config.waitRecheckMs), new Catalog({ enableTestTools: true }).categories());
    await ch.close();
  });
  await amqp.start();
  await amqp.stop();
}

export function bearer(secret: string): Record<string, string> {
  return { Authorization: `Bearer ${secret}` };
}

/** Polls an execution until `done` holds or the time runs out. */
export async function waitForExecution(
  stack: TestStack,
  secret: string,
  id: string,
  done: (e: Record<string, unknown>) => boolean = (e) => ['succeeded', 'failed', 'cancelled', 'needs_review'].includes(e.status as string),
  timeoutMs = 20_000,
): Promise<Record<string, unknown>> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const res = await stack.http().get(`/tools/executions/${id}`).set(bearer(secret));
    if (res.status !== 200) throw new Error(`GET execution: ${res.status} ${JSON.stringify(res.body)}`);
    if (done(res.body.data)) return res.body.data;
    if (Date.now() > until) throw new Error(`execution ${id} still ${res.body.data.status} after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

export async function projectBalance(db: Knex, projectId: string): Promise<{ available: number; reserved: number }> {
  const row = await db('projects').select('available_micros', 'reserved_micros').where({ id: projectId }).first();
  return { available: row.available_micros, reserved: row.reserved_micros };
}

let validator: OpenApiValidator | undefined;

/**
 * A supertest agent whose every response is checked against services/gateway/openapi.json
 * (status documented, body schema, required headers): the document and the code cannot
 * drift without a test failing.
 */
function validatingAgent(url: string): supertest.Agent {
  validator ??= new OpenApiValidator(loadOpenApi());
  const agent = supertest.agent(url);
  for (const method of ['get', 'post', 'put', 'patch', 'delete'] as const) {
    const original: (path: string) => supertest.Test = agent[method].bind(agent);
    (agent as unknown as Record<string, unknown>)[method] = (path: string) =>
      original(path).expect((res) => validator!.assertValid(method.toUpperCase(), path, res.status, res.headers, res.body));
  }
  return agent;
}

/**
 * The usual prologue of an integration test file: starts a stack before the file's tests,
 * and after them runs the ledger audit (unless `audit: false`) and stops everything. Returns
 * a handle that forwards to the running stack.
 */
export function useStack(options: StackOptions & { audit?: boolean } = {}): TestStack {
  let current: TestStack | undefined;
  beforeAll(async () => {
    current = await startStack(options);
  });
  afterAll(async () => {
    if (!current) return;
    const audit = options.audit === false ? undefined : await current.audit();
    await current.stop();
    if (audit) expect(audit.problems).toEqual([]);
  });
  return new Proxy({} as TestStack, {
    get(_target, prop) {
      if (!current) throw new Error('the stack is not started yet (use it inside tests or hooks)');
      // the stack's methods are closures, and db is a knex function with properties: no binding
      return (current as unknown as Record<string | symbol, unknown>)[prop];
    },
  });
}
