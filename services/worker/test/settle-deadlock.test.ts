import type { Knex } from 'knex';
import { auditLedger, claimExecution, createDb, type StepRecord } from '@tes/db';
import { createLogger, createMetrics } from '@tes/observability';
import { ObjectStore } from '@tes/storage';
import { CaptureTransport, seedProject, startEmbeddedS3, useTestDatabase } from '@tes/testing';
import { settle } from '../src/execution/settle';
import { bucketKeys } from './engine-model/stack';
import { FakeProvider, modelEngine, modelPrices, submitModel } from './engine-model/tool';

/**
 * Issue #26, defect 4, the worker's side: a settlement killed by a deadlock (40P01) was thrown
 * out of the engine like any failure, so the message was nacked, the lease held until it
 * expired, the reaper counted an attempt and the step's artifacts were orphaned. The settlement
 * is one statement, all rolled back by the deadlock: it is now sent again in place.
 *
 * The deadlock is made on purpose: a transaction X holds the project's balance row; the
 * worker's settlement updates the execution row and waits for the balance row; X then updates
 * the execution row. The worker's connection detects the cycle (its deadlock_timeout is 2 s, X's
 * 60 s), so it is the worker's statement that Postgres kills.
 */
const { db, database } = useTestDatabase({ poolMax: 4 });
let workerDb: Knex;

beforeAll(() => {
  workerDb = createDb({ url: `${database.url}?options=${encodeURIComponent('-c deadlock_timeout=2000')}`, poolMax: 2 });
});

afterAll(async () => {
  await workerDb?.destroy();
});

it('a settlement killed by a deadlock is retried in place: the execution settles once, on this attempt', async () => {
  expect((await workerDb.raw<{ rows: { deadlock_timeout: string }[] }>('SHOW deadlock_timeout')).rows[0]!.deadlock_timeout).toBe('2s');
  const p = await seedProject(db, { creditMicros: 100_000 });
  const id = await submitModel(db, p, await modelPrices(db), { steps: [{ ms: 0, file: false, external: false }] });
  const e = (await claimExecution(workerDb, id, 'wrk_settle', 60_000))!;
  const step: StepRecord = {
    executionId: id,
    index: 0,
    name: 'work_0',
    status: 'succeeded',
    costMicros: 700,
    checkpoint: null,
    errorCode: null,
    externalRef: null,
    attempts: 1,
    startedAt: new Date().toISOString(),
    finishedAt: new Date().toISOString(),
  };
  const capture = new CaptureTransport();
  const deps = { db: workerDb, logger: createLogger({ service: 't', transports: [capture] }), metrics: createMetrics('test', false), workerId: 'wrk_settle' };

  const x = await db.transaction();
  await x.raw("SET LOCAL deadlock_timeout = '60s'");
  await x.raw('UPDATE projects SET available_micros = available_micros WHERE id = ?', [p.projectId]);
  const settled = settle(deps, e, 'succeeded', [step], { output: {} }).then(
    (r) => ({ ok: r }),
    (err: unknown) => ({ err: err as { code?: string } }),
  );
  const by = Date.now() + 20_000;
  while ((await db.raw('SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = ?', ['Lock'])).rows.length === 0) {
    if (Date.now() > by) throw new Error('the settlement never waited on the balance row');
    await new Promise((r) => setTimeout(r, 20));
  }
  // the cycle: X waits for the settlement's execution row, the settlement for X's balance row
  await x.raw('UPDATE executions SET updated_at = now() WHERE id = ?', [id]);
  await x.commit();

  // before the fix: { err: [error: deadlock detected] } (40P01), thrown out of the engine
  expect(await settled).toEqual({ ok: 'ended' });
  expect(capture.records.filter((r) => r.message === 'worker.settle.retried').map((r) => r.code)).toEqual(['40P01']);
  const row = await db('executions').where({ id }).first('status', 'charged_micros', 'attempts');
  expect(row).toEqual({ status: 'succeeded', charged_micros: 700, attempts: 0 });
  expect(await db('ledger_entries').where({ execution_id: id, kind: 'settle', account: 'charged' }).count({ n: '*' })).toEqual([{ n: 1 }]);
  expect((await auditLedger(db)).ok).toBe(true);
}, 60_000);

it.each([
  ['deadlocking', '40P01'],
  // the worker's DB_LOCK_TIMEOUT_MS and DB_STATEMENT_TIMEOUT_MS: the statement was cancelled, nothing committed
  ['waiting past its lock timeout', '55P03'],
  ['running past its statement timeout', '57014'],
])(
  'a settlement that keeps %s is given back: no attempt spent, its objects deleted, and the next claim finishes it',
  async (_what, sqlstate) => {
    const s3 = await startEmbeddedS3();
    const store = new ObjectStore({
      endpoint: s3.endpoint,
      publicEndpoint: s3.endpoint,
      bucket: 'settle-deadlock',
      region: 'us-east-1',
      accessKeyId: s3.accessKeyId,
      secretAccessKey: s3.secretAccessKey,
    });
    try {
      await store.ensureBucket();
      const p = await seedProject(db, { creditMicros: 100_000 });
      const id = await submitModel(db, p, await modelPrices(db), { steps: [{ ms: 0, file: true, external: false }] });
      // Postgres answers this execution's settlement with a deadlock, whatever the retries do
      await db.raw(`CREATE FUNCTION test_deadlock() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN RAISE EXCEPTION 'injected' USING ERRCODE = '${sqlstate}'; END $$`);
      await db.raw(
        `CREATE TRIGGER test_deadlock BEFORE UPDATE ON executions FOR EACH ROW
        WHEN (NEW.id = '${id}' AND NEW.status = 'succeeded') EXECUTE FUNCTION test_deadlock()`,
      );
      const resent: string[] = [];
      const provider = new FakeProvider();
      const engine = modelEngine({ db: workerDb, store, provider, workerId: 'wrk_deadlocked', resent });
      try {
        // before the fix: the 40P01 was thrown out of handle (a nack), the lease held until it expired
        expect(await engine.handle({ executionId: id, projectId: p.projectId }, 'test')).toBe('ack');
        expect(resent).toEqual([id]);
        expect(await db('executions').where({ id }).first('status', 'lease_owner', 'attempts')).toEqual({ status: 'running', lease_owner: null, attempts: 0 });
        expect(await bucketKeys(s3, 'settle-deadlock')).toEqual([]);
        await db.raw('DROP TRIGGER test_deadlock ON executions');
        expect(await engine.handle({ executionId: id, projectId: p.projectId }, 'test')).toBe('ack');
      } finally {
        await engine.sandbox.stop();
      }
      expect(await db('executions').where({ id }).first('status', 'attempts', 'charged_micros')).toEqual({
        status: 'succeeded',
        attempts: 0,
        charged_micros: 1_000,
      });
      const named = await db('artifacts').where({ execution_id: id }).pluck('storage_key');
      expect(await bucketKeys(s3, 'settle-deadlock')).toEqual(named);
      expect(named).toHaveLength(1);
      expect((await auditLedger(db)).ok).toBe(true);
    } finally {
      await db.raw('DROP TRIGGER IF EXISTS test_deadlock ON executions');
      await db.raw('DROP FUNCTION IF EXISTS test_deadlock()');
      store.close();
      await s3.stop();
    }
  },
  60_000,
);
