import type { Knex } from 'knex';
import { creditBalance, createDb, publishPrices, settleExecution } from '@tes/db';
import { createTestDatabase, seedProject, submitTestExecution, type TestDatabase } from '@tes/testing';

/**
 * Issue #24: the journal grows by four or five entries per execution for ever, so every key its
 * indexes take must grow with time. A random key (a UUID) lands each insert on a random leaf
 * of an index of tens of millions of entries: rarely in the buffer cache, and written whole to
 * the WAL at its first change after each checkpoint. At 10 M executions of history that made
 * each submit cost PostgreSQL several times its CPU on an empty database.
 *
 * The check: entries written one after another (credit, reserve, settle, in turn) sort in
 * the order they were written under each index's own collation.
 */
let database: TestDatabase;
let db: Knex;

beforeAll(async () => {
  database = await createTestDatabase();
  db = createDb({ url: database.url, poolMax: 2 });
});

afterAll(async () => {
  await db?.destroy();
  await database?.drop();
});

test('journal transaction ids grow with time: credits, reservations and settlements', async () => {
  const { priceVersion } = await publishPrices(db, { 'test.sleep': 1 });
  const p = await seedProject(db, { creditMicros: 1_000_000 });
  for (let i = 0; i < 12; i++) {
    const id = await submitTestExecution(db, p, { priceVersion });
    expect(await settleExecution(db, { executionId: id, projectId: p.projectId, status: 'succeeded', chargedMicros: 400, from: ['queued'] })).not.toBeNull();
    await creditBalance(db, { projectId: p.projectId, micros: 5, reference: `top-up-${i}` });
  }
  const written = await db.raw<{ rows: { transaction_id: string }[] }>(`SELECT transaction_id FROM ledger_entries ORDER BY id`);
  const sorted = await db.raw<{ rows: { transaction_id: string }[] }>(`SELECT transaction_id FROM ledger_entries ORDER BY transaction_id, id`);
  expect(written.rows.length).toBeGreaterThanOrEqual(12 * 7);
  expect(written.rows.map((r) => r.transaction_id)).toEqual(sorted.rows.map((r) => r.transaction_id));
});
