import { setTimeout as sleep } from 'node:timers/promises';
import type { Knex } from 'knex';
import { ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import { Catalog } from '@tes/catalog';
import { abandonExecution, createDb, MAX_ATTEMPTS, reapExpiredLeases } from '@tes/db';
import type { ExecutionMessage } from '@tes/core';
import { createLogger, createMetrics } from '@tes/observability';
import { GuardedHttp } from '@tes/outbound';
import type { ObjectStore } from '@tes/storage';
import { CaptureTransport, startTcpRelay, type EmbeddedS3, type TcpRelay } from '@tes/testing';
import { StepEngine } from '../../src/engine';
import { FakeProvider, MODEL_TOOL, modelRunner } from './tool';

export interface MiniStackOptions {
  /** The test's own pool (the reaper's and the checks'): never disturbed. */
  db: Knex;
  databaseUrl: string;
  store: ObjectStore;
  leaseTtlMs: number;
  artifactPutTimeoutMs: number;
  /** Executions one engine runs at once. */
  concurrency: number;
}

interface RunningEngine {
  engine: StepEngine;
  db: Knex;
  /** The engine's connection to Postgres: the test stalls it to make renewals go unconfirmed. */
  relay: TcpRelay;
  stopping: boolean;
  consumers: Promise<void>[];
}

/**
 * The worker's surroundings, in process and small, around the real StepEngine: a queue for the
 * broker (a message handled 'retry' goes back on it, `publishLater` puts one on it after the
 * delay), the relay's reaper (reapExpiredLeases every 100 ms, exhausted executions abandoned as
 * the relay does) and one engine at a time, whose database connections go through a TCP relay
 * so a test can stall them. `restart` stops the engine as a shutdown does (abortAll: running
 * work is handed back) and starts a new one with a new worker id.
 */
export class MiniStack {
  readonly provider = new FakeProvider();
  /** Errors the engine threw (a real consumer nacks them; here they go back on the queue). */
  readonly thrown: unknown[] = [];
  /** What the engines logged (their event names tell which faults bit: worker.lease.lost, worker.execution.released, ...). */
  readonly logs = new CaptureTransport();
  private readonly queue: ExecutionMessage[] = [];
  private readonly timers = new Set<NodeJS.Timeout>();
  private current: RunningEngine | undefined;
  private engines = 0;
  private stopped = false;
  private reaper: Promise<void> | undefined;

  constructor(private readonly o: MiniStackOptions) {}

  async start(): Promise<void> {
    this.current = await this.startEngine();
    this.reaper = this.reap();
  }

  send(message: ExecutionMessage): void {
    this.queue.push(message);
  }

  /** The engine's database connections hold every request for `ms` (bytes wait, none is lost). */
  stall(ms: number): void {
    const { relay } = this.current!;
    relay.holdRequests(true);
    this.later(ms, () => relay.holdRequests(false));
  }

  /** Stops the engine as a shutdown does and starts a new one. */
  async restart(): Promise<void> {
    const old = this.current!;
    this.current = await this.startEngine();
    await this.stopEngine(old);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    for (const t of this.timers) clearTimeout(t);
    if (this.current) {
      this.current.relay.holdRequests(false);
      await this.stopEngine(this.current);
    }
    await this.reaper;
  }

  private later(ms: number, fn: () => void): void {
    const t = setTimeout(() => {
      this.timers.delete(t);
      fn();
    }, ms);
    this.timers.add(t);
  }

  private async startEngine(): Promise<RunningEngine> {
    const relay = await startTcpRelay(this.o.databaseUrl, 5432);
    const db = createDb({ url: relay.url, poolMax: this.o.concurrency * 2 + 1 });
    this.engines += 1;
    const engine = new StepEngine({
      db,
      catalog: new Catalog({ enableTestTools: true, extraTools: [MODEL_TOOL] }),
      store: this.o.store,
      runners: { [MODEL_TOOL.name]: modelRunner(this.provider) },
      logger: createLogger({ service: 'worker', level: 'debug', transports: [this.logs] }),
      metrics: createMetrics('test', false),
      leaseTtlMs: this.o.leaseTtlMs,
      artifactPutTimeoutMs: this.o.artifactPutTimeoutMs,
      workerId: `wrk_model_${this.engines}`,
      waitMs: 100,
      publishLater: (message) => {
        this.later(100, () => this.send(message));
        return Promise.resolve();
      },
      providers: {
        http: new GuardedHttp({ allowPrivateNetworks: false }),
        baseUrls: { replicate: '', fal: '', openai: '' },
        credentials: {},
        jobTimeoutMs: 1_000,
      },
    });
    const running: RunningEngine = { engine, db, relay, stopping: false, consumers: [] };
    running.consumers = Array.from({ length: this.o.concurrency }, () => this.consume(running));
    return running;
  }

  private async stopEngine(e: RunningEngine): Promise<void> {
    e.stopping = true;
    e.engine.abortAll();
    await Promise.all(e.consumers);
    await e.engine.sandbox.stop();
    await e.db.destroy();
    await e.relay.close();
  }

  private async consume(e: RunningEngine): Promise<void> {
    while (!e.stopping) {
      const message = this.queue.shift();
      if (!message) {
        await sleep(10);
        continue;
      }
      const disposition = await e.engine.handle(message, 'test').catch((err: unknown) => {
        this.thrown.push(err);
        return 'retry' as const;
      });
      if (disposition === 'retry') this.send(message);
    }
  }

  /** The relay's reaper pass, as services/relay runs it (re-dispatch, attempts, abandonment). */
  private async reap(): Promise<void> {
    while (!this.stopped) {
      try {
        const { requeued, exhausted } = await reapExpiredLeases(this.o.db, { limit: 100, maxAttempts: MAX_ATTEMPTS, redispatchMs: 500 });
        for (const id of exhausted) {
          await abandonExecution(this.o.db, { executionId: id, errorCode: 'delivery_limit_exceeded', errorMessage: 'attempts exhausted' });
        }
        const projects = await this.o.db('executions').whereIn('id', requeued).select('id', 'project_id');
        for (const r of projects as { id: string; project_id: string }[]) this.send({ executionId: r.id, projectId: r.project_id });
      } catch (err) {
        this.thrown.push(err);
      }
      await sleep(100);
    }
  }
}

/** Every key in the bucket (the model's objects are few: one page). */
export async function bucketKeys(s3: EmbeddedS3, bucket: string): Promise<string[]> {
  const client = new S3Client({
    endpoint: s3.endpoint,
    region: 'us-east-1',
    forcePathStyle: true,
    credentials: { accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey },
  });
  // as ObjectStore does: s3rver checks a bucket request's signature for `/bucket`, not `/bucket/`
  client.middlewareStack.add(
    (next) => (args) => {
      const req = args.request as { path?: string };
      if (typeof req.path === 'string' && /^\/[^/]+\/$/.test(req.path)) req.path = req.path.slice(0, -1);
      return next(args);
    },
    { step: 'build' },
  );
  try {
    const listed = await client.send(new ListObjectsV2Command({ Bucket: bucket }));
    return (listed.Contents ?? []).map((c) => c.Key!).sort();
  } finally {
    client.destroy();
  }
}
