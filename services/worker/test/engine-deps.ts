import type { Knex } from 'knex';
import { Catalog, type ToolDefinition } from '@tes/catalog';
import { createMetrics, createNullLogger } from '@tes/observability';
import { GuardedHttp } from '@tes/outbound';
import { ObjectStore } from '@tes/storage';
import { startEmbeddedS3, useTestDatabase, type EmbeddedS3, type TestDatabase } from '@tes/testing';
import type { EngineDeps } from '../src/engine';
import type { AnyRunner } from '../src/runner';

/**
 * What the engine tests that drive a StepEngine directly share: the stack they run it on, and
 * the engine's settings when a test has no reason to choose its own. A test states only what it
 * chooses (its worker id, what happens to a deferred execution, a lease TTL), so those stand out.
 */

/** The stack of an engine test file: its own database and pool, an embedded S3, and a store on a bucket of its own. */
export interface EngineStack {
  db: Knex;
  database: TestDatabase;
  s3: EmbeddedS3;
  store: ObjectStore;
}

/**
 * Makes the stack before the file's tests and takes it down after them; returns handles that
 * forward to its parts once they exist (as useTestDatabase does). Declare it before the file's
 * own beforeAll hooks; an afterAll that still needs the database (a ledger audit) is declared
 * before it, since Jest runs afterAll hooks in the order they were declared.
 */
export function useEngineStack(options: { bucket: string; poolMax: number }): EngineStack {
  const { db, database } = useTestDatabase({ poolMax: options.poolMax });
  let s3: EmbeddedS3 | undefined;
  let store: ObjectStore | undefined;
  beforeAll(async () => {
    s3 = await startEmbeddedS3();
    store = new ObjectStore({
      endpoint: s3.endpoint,
      publicEndpoint: s3.endpoint,
      bucket: options.bucket,
      region: 'us-east-1',
      accessKeyId: s3.accessKeyId,
      secretAccessKey: s3.secretAccessKey,
    });
    await store.ensureBucket();
  });
  afterAll(async () => {
    store?.close();
    await s3?.stop();
  });
  return { db, database, s3: later(() => s3, {} as EmbeddedS3), store: later(() => store, Object.create(ObjectStore.prototype) as ObjectStore) };
}

/** A handle that forwards property reads to the value `current` returns, once beforeAll made it. */
function later<T extends object>(current: () => T | undefined, target: T): T {
  return new Proxy(target, {
    get: (_target, prop) => {
      const value = current();
      if (value === undefined) throw new Error('the engine stack is made in beforeAll: use it inside tests or hooks');
      const property = Reflect.get(value, prop, value) as unknown;
      return typeof property === 'function' ? (property as (...a: unknown[]) => unknown).bind(value) : property;
    },
  });
}

/** Providers no test here calls: no base URLs, no credentials; a provider job times out after `jobTimeoutMs`. */
export function noProviders(jobTimeoutMs = 1_000): EngineDeps['providers'] {
  return {
    http: new GuardedHttp({ allowPrivateNetworks: false }),
    baseUrls: { replicate: '', fal: '', openai: '' },
    credentials: {},
    jobTimeoutMs,
  };
}

/**
 * A StepEngine's dependencies for one extra tool run by `runner`, on `stack`'s database and store.
 * The defaults: a null logger, metrics of its own, a 10 s lease (no renewal matters to a test), a
 * 30 s artifact PUT, worker id wrk_test, a 1 s wait, no providers, and nothing deferred (a
 * deferral fails the test's execution). `overrides` replace any of them.
 */
export function engineDeps(stack: { db: Knex; store: ObjectStore }, tool: ToolDefinition, runner: AnyRunner, overrides: Partial<EngineDeps> = {}): EngineDeps {
  return {
    db: stack.db,
    catalog: new Catalog({ enableTestTools: true, extraTools: [tool] }),
    store: stack.store,
    runners: { [tool.name]: runner },
    logger: createNullLogger(),
    metrics: createMetrics('test', false),
    leaseTtlMs: 10_000,
    artifactPutTimeoutMs: 30_000,
    workerId: 'wrk_test',
    waitMs: 1_000,
    publishLater: async () => Promise.reject(new Error('nothing is deferred here')),
    providers: noProviders(),
    ...overrides,
  };
}
