import { setTimeout as sleep } from 'node:timers/promises';
import { auditLedger, getExecutionById } from '@tes/db';
import { createNullLogger } from '@tes/observability';
import { ObjectStore } from '@tes/storage';
import { seedProject, startEmbeddedS3, useTestDatabase, type EmbeddedS3 } from '@tes/testing';
import { storeFiles } from '../src/execution/artifacts';
import { bucketKeys, MiniStack } from './engine-model/stack';
import { modelPrices, submitModel } from './engine-model/tool';

/**
 * Issue #26, defect 3: the lease was renewed only while a step's code ran, not while its
 * artifacts were uploaded nor while the statement recording its end ran. With a 1 s TTL and a
 * 2.5 s upload the reaper took the lease during every upload: 5 attempts, 5 objects uploaded
 * and thrown away, then `failed delivery_limit_exceeded`. Here the real engine, a real S3 server
 * whose PUTs take 2.5 s and the relay's reaper every 100 ms: one attempt, one object.
 */
const { db, database } = useTestDatabase({ poolMax: 4 });
let s3: EmbeddedS3;
let store: ObjectStore;
const BUCKET = 'slow-upload';

beforeAll(async () => {
  s3 = await startEmbeddedS3();
  store = new ObjectStore({
    endpoint: s3.endpoint,
    publicEndpoint: s3.endpoint,
    bucket: BUCKET,
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

afterEach(async () => {
  s3.delayObjectPuts(0);
  expect((await auditLedger(db)).ok).toBe(true);
});

it('an upload longer than the lease TTL keeps the lease: the execution succeeds in one attempt with one object', async () => {
  const p = await seedProject(db, { creditMicros: 100_000 });
  const priceVersion = await modelPrices(db);
  const stack = new MiniStack({ db, databaseUrl: database.url, store, leaseTtlMs: 1_000, artifactPutTimeoutMs: 30_000, concurrency: 1 });
  s3.delayObjectPuts(2_500);
  const putsBefore = s3.objectPuts();
  const id = await submitModel(db, p, priceVersion, { steps: [{ ms: 50, file: true, external: false }] });
  await stack.start();
  try {
    stack.send({ executionId: id, projectId: p.projectId });
    const by = Date.now() + 45_000;
    for (;;) {
      const e = await getExecutionById(db, id);
      if (e && !['queued', 'running', 'waiting'].includes(e.status)) break;
      if (Date.now() > by) throw new Error(`the execution did not end within 45 s (status ${e?.status})`);
      await sleep(100);
    }
  } finally {
    await stack.stop();
  }
  const row = await db('executions').where({ id }).first('status', 'error_code', 'attempts', 'claims', 'charged_micros');
  const artifacts = await db('artifacts').where({ execution_id: id }).select('storage_key');
  const keys = (await bucketKeys(s3, BUCKET)).filter((k) => k.includes(id));
  expect({ ...row, puts: s3.objectPuts() - putsBefore, objects: keys.length, rows: artifacts.length }).toEqual({
    status: 'succeeded',
    error_code: null,
    attempts: 0,
    claims: 1,
    charged_micros: 1_000,
    puts: 1,
    objects: 1,
    rows: 1,
  });
  expect(keys).toEqual(artifacts.map((a: { storage_key: string }) => a.storage_key));
  expect(stack.thrown).toEqual([]);
}, 60_000);

it('an artifact put is bounded by ARTIFACT_PUT_TIMEOUT_MS: aborted, and nothing of it is left in the bucket', async () => {
  s3.delayObjectPuts(3_000);
  const execution = { id: 'exe_put_timeout', projectId: 'prj_put_timeout' } as Parameters<typeof storeFiles>[1];
  const started = Date.now();
  const stored = storeFiles(
    { db, store, logger: createNullLogger(), artifactPutTimeoutMs: 1_000 },
    execution,
    0,
    [{ format: 'txt', mimeType: 'text/plain', body: Buffer.from('x') }],
    new AbortController().signal,
  );
  await expect(stored).rejects.toThrow(/exceeded ARTIFACT_PUT_TIMEOUT_MS \(1000 ms\)/);
  expect(Date.now() - started).toBeLessThan(2_900);
  await sleep(3_000); // the held PUT reaches s3rver after its client gave up: it must not be stored
  expect((await bucketKeys(s3, BUCKET)).filter((k) => k.includes('exe_put_timeout'))).toEqual([]);
}, 30_000);
