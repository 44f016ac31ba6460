import type { Knex } from 'knex';
import { auditLedger, claimExecution, createDb, type StepRecord } from '@tes/db';
import { createLogger, createMetrics } from '@tes/observability';
import { CaptureTransport, seedProject, useTestDatabase } from '@tes/testing';
import { settle } from '../src/execution/settle';
import { modelPrices, submitModel } from './engine-model/tool';

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
