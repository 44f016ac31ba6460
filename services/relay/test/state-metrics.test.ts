import { setTimeout as sleep } from 'node:timers/promises';
import type { Knex } from 'knex';
import { claimExecution, createDb, publishPrices } from '@tes/db';
import { AmqpClient } from '@tes/messaging';
import { createLogger, createMetrics } from '@tes/observability';
import { CaptureTransport, createTestDatabase, seedProject, submitTestExecution, type TestDatabase } from '@tes/testing';
import { StateMetrics } from '../src/state-metrics';

/**
 * The ledger audit's gauge on real Postgres: 1 after an audit that holds, and NaN ("no
 * verdict") when an audit cannot complete, so TesLedgerAuditMissing (no relay verdict for 30
 * minutes) fires when the audits keep failing, instead of the last good verdict standing forever.
 */
let database: TestDatabase;

beforeAll(async () => {
  database = await createTestDatabase();
});

afterAll(async () => {
  await database?.drop();
});

async function auditGauge(metrics: ReturnType<typeof createMetrics>): Promise<number | undefined> {
  return (await metrics.registry.getSingleMetric('tes_ledger_audit_ok')!.get()).values[0]?.value;
}

test('an audit that cannot complete leaves no verdict (NaN), not the last one', async () => {
  const logs = new CaptureTransport();
  const logger = createLogger({ service: 'test', transports: [logs] });
  const metrics = createMetrics('relay', false);
  const db: Knex = createDb({ url: database.url, poolMax: 1 });
  // never started: audit() reads only the database
  const amqp = new AmqpClient({ url: 'amqp://guest:guest@127.0.0.1:5672', logger, name: 'test-state-metrics' });
  const state = new StateMetrics({ db, amqp, metrics, logger, queues: [], intervalMs: 60_000, auditIntervalMs: 60_000 });
  expect(await auditGauge(metrics)).toBeNaN();
  await state.audit();
  expect(await auditGauge(metrics)).toBe(1);
  // the database goes away: the next audit fails
  await db.destroy();
  await state.audit();
  expect(await auditGauge(metrics)).toBeNaN();
});

test('two relays report one verdict: a mis-summed transaction turns both to 0 and keeps them there', async () => {
  const logs = new CaptureTransport();
  const logger = createLogger({ service: 'test', transports: [logs] });
  const db: Knex = createDb({ url: database.url, poolMax: 2 });
  const amqp = new AmqpClient({ url: 'amqp://guest:guest@127.0.0.1:5672', logger, name: 'test-state-metrics' });
  const relays = [createMetrics('relay', false), createMetrics('relay', false)].map((metrics) => ({
    metrics,
    state: new StateMetrics({ db, amqp, metrics, logger, queues: [], intervalMs: 60_000, auditIntervalMs: 60_000 }),
  }));
  try {
    const p = await seedProject(db, { creditMicros: 1_000 });
    await Promise.all(relays.map((r) => r.state.audit()));
    for (const r of relays) await r.state.audit();
    for (const r of relays) expect(await auditGauge(r.metrics)).toBe(1);
    // a credit whose postings do not sum to zero, the balance row moved with its available posting
    await db.transaction(async (trx) => {
      await trx.raw('SET LOCAL session_replication_role = replica');
      await trx.raw(
        `INSERT INTO ledger_entries (transaction_id, project_id, kind, account, amount_micros)
                     VALUES ('replayed', :p, 'credit', 'funding', -1000), ('replayed', :p, 'credit', 'available', 999)`,
        { p: p.projectId },
      );
      await trx.raw('UPDATE projects SET available_micros = available_micros + 999 WHERE id = ?', [p.projectId]);
    });
    for (const r of relays) await r.state.audit();
    for (const r of relays) await r.state.audit();
    for (const r of relays) expect(await auditGauge(r.metrics)).toBe(0);
  } finally {
    await db.destroy();
  }
});

test('start() does not wait for the audit: a relay catching up on a backlog serves its health checks meanwhile', async () => {
  // At 1 M executions written after the cursor the first audit took 147 s, and start() awaited
  // it: the health server came up only after it, past Kubernetes' startup probe (60 s).
  const logger = createLogger({ service: 'test', transports: [new CaptureTransport()] });
  const metrics = createMetrics('relay', false);
  const own = await createTestDatabase(); // the file's database holds the planted defect above
  const db: Knex = createDb({ url: own.url, poolMax: 2 });
  const holder: Knex = createDb({ url: own.url, poolMax: 1 });
  const amqp = new AmqpClient({ url: 'amqp://guest:guest@127.0.0.1:5672', logger, name: 'test-state-metrics-start' });
  const state = new StateMetrics({ db, amqp, metrics, logger, queues: [], intervalMs: 60_000, auditIntervalMs: 60_000 });
  // the audit's state row held by another transaction: the first pass waits on it for as long
  const trx = await holder.transaction();
  try {
    await trx.raw('SELECT 1 FROM ledger_audit_state WHERE id = 1 FOR UPDATE');
    const startedIn = await Promise.race([state.start().then(() => 'started'), sleep(5_000).then(() => 'still starting after 5 s')]);
    expect(startedIn).toBe('started');
    expect(await auditGauge(metrics)).toBeNaN(); // no verdict yet
  } finally {
    await trx.rollback(); // (before the fix, this let the awaited audit and start() go on)
  }
  await state.stop(); // waits for the audit, which now completes
  expect(await auditGauge(metrics)).toBe(1);
  await db.destroy();
  await holder.destroy();
  await own.drop();
}, 60_000);

test('queued and running executions and the oldest queued age per category, at 0 once a line empties (issue #25)', async () => {
  const logger = createLogger({ service: 'test', transports: [new CaptureTransport()] });
  const metrics = createMetrics('relay', false);
  const db: Knex = createDb({ url: database.url, poolMax: 2 });
  const amqp = new AmqpClient({ url: 'amqp://guest:guest@127.0.0.1:5672', logger, name: 'test-state-metrics-queue' });
  const state = new StateMetrics({ db, amqp, metrics, logger, queues: [], categories: ['image', 'test'], intervalMs: 60_000, auditIntervalMs: 60_000 });
  const gauge = async (name: string, category: string) =>
    (await metrics.registry.getSingleMetric(name)!.get()).values.find((v) => v.labels.category === category)?.value;
  try {
    const p = await seedProject(db, { creditMicros: 1_000 });
    const { priceVersion } = await publishPrices(db, { 'test.sleep': 1 });
    const submit = (category: string) => submitTestExecution(db, p, { category, priceVersion, reservedMicros: 1, dispatchDeadlineMs: 600_000 });
    const oldest = await submit('test');
    await db.raw(`UPDATE executions SET created_at = tes_now() - interval '120 seconds' WHERE id = ?`, [oldest]);
    const second = await submit('test');
    await claimExecution(db, await submit('test'), 'w', 600_000);
    await state.collect();
    expect(await gauge('tes_queued_executions', 'test')).toBe(2);
    expect(await gauge('tes_running_executions', 'test')).toBe(1);
    expect(await gauge('tes_oldest_queued_execution_age_seconds', 'test')).toBeGreaterThanOrEqual(120);
    expect(await gauge('tes_oldest_queued_execution_age_seconds', 'test')).toBeLessThan(130);
    // a catalog category with nothing queued or running is reported, at 0
    expect(await gauge('tes_queued_executions', 'image')).toBe(0);
    expect(await gauge('tes_oldest_queued_execution_age_seconds', 'image')).toBe(0);

    // the line empties: the gauges say so, they do not keep their last value
    await claimExecution(db, oldest, 'w', 600_000);
    await claimExecution(db, second, 'w', 600_000);
    await state.collect();
    expect(await gauge('tes_queued_executions', 'test')).toBe(0);
    expect(await gauge('tes_running_executions', 'test')).toBe(3);
    expect(await gauge('tes_oldest_queued_execution_age_seconds', 'test')).toBe(0);
  } finally {
    await state.stop();
    await db.destroy();
  }
});

test('the relay checks and vacuums execution_line once a minute, in the background (issue #24)', async () => {
  const logs = new CaptureTransport();
  const logger = createLogger({ service: 'test', transports: [logs] });
  const db: Knex = createDb({ url: database.url, poolMax: 2 });
  const amqp = new AmqpClient({ url: 'amqp://guest:guest@127.0.0.1:5672', logger, name: 'test-state-metrics-vacuum' });
  const state = new StateMetrics({ db, amqp, metrics: createMetrics('relay', false), logger, queues: [], intervalMs: 60_000, auditIntervalMs: 60_000 });
  const vacuums = async () =>
    Number((await db.raw<{ rows: { n: string }[] }>(`SELECT vacuum_count AS n FROM pg_stat_user_tables WHERE relname = 'execution_line'`)).rows[0]!.n);
  const until = async (what: () => Promise<boolean>) => {
    for (let i = 0; i < 100 && !(await what()); i++) await sleep(50);
  };
  const now = Date.now();
  const clock = jest.spyOn(Date, 'now');
  try {
    const id = await submitTestExecution(db, await seedProject(db, { creditMicros: 1_000 }));
    await db('execution_line').where({ execution_id: id }).delete(); // as a write that bypassed the triggers leaves it
    const before = await vacuums();
    clock.mockReturnValue(now);
    await state.collect();
    await until(async () => (await vacuums()) === before + 1);
    expect(await vacuums()).toBe(before + 1);
    expect(await db('execution_line').where({ execution_id: id }).first()).toMatchObject({ status: 'queued' });
    expect(logs.records.filter((e) => e.message === 'relay.line_repaired')).toEqual([expect.objectContaining({ added: 1, removed: 0 })]);

    clock.mockReturnValue(now + 30_000); // within the minute: not again
    await state.collect();
    await sleep(300);
    expect(await vacuums()).toBe(before + 1);

    clock.mockReturnValue(now + 61_000); // a minute on: again
    await state.collect();
    await until(async () => (await vacuums()) === before + 2);
    expect(await vacuums()).toBe(before + 2);
  } finally {
    clock.mockRestore();
    await state.stop();
    await db.destroy();
  }
});
