import type { Knex } from 'knex';
import { newId } from '@tes/core';
import { auditLedger, auditLedgerPass, creditBalance, createDb, MIGRATIONS, publishPrices, settleExecution, type AuditProblem } from '@tes/db';
import { createTestDatabase, seedProject, submitTestExecution, type TestDatabase } from '@tes/testing';

/**
 * The incremental ledger audit (the relay's periodic pass) and the streaming full audit (`admin
 * ledger audit`) on real Postgres: both hold over honest writes, both catch each defect planted
 * with raw SQL as a bug or an attacker would write it, the pass reads only what was written since
 * its cursor, and its cursor never skips a row whose transaction commits after a pass.
 *
 * Defects are planted with session_replication_role = replica (triggers off): the model is a
 * writer that does not cooperate (a repair script, a restore with --disable-triggers, a
 * replication apply), so no check may rely on a trigger having run for the defective write.
 * Each test has a database of its own: findings are sticky, by design.
 */
let database: TestDatabase;
let db: Knex;

beforeEach(async () => {
  database = await createTestDatabase();
  db = createDb({ url: database.url, poolMax: 4 });
});

afterEach(async () => {
  await db?.destroy();
  await database?.drop();
});

let priceVersion: string;
async function submitted(projectId: string, keyId: string, reservedMicros = 1_000): Promise<string> {
  priceVersion ??= (await publishPrices(db, { 'test.sleep': 1 })).priceVersion;
  // throws unless the submit created the execution
  return submitTestExecution(db, { projectId, keyId }, { priceVersion, reservedMicros });
}

const settle = (id: string, projectId: string, chargedMicros: number) =>
  settleExecution(db, { executionId: id, projectId, status: 'succeeded', chargedMicros, from: ['queued'] });

/** A project with money moved every honest way: credits, reservations, settlements, an open execution. */
async function honestWork(): Promise<{ projectId: string; keyId: string; settled: string; open: string }> {
  priceVersion = undefined as unknown as string;
  const p = await seedProject(db, { creditMicros: 100_000 });
  const settled = await submitted(p.projectId, p.keyId);
  expect(await settle(settled, p.projectId, 400)).not.toBeNull();
  const open = await submitted(p.projectId, p.keyId, 2_000);
  await creditBalance(db, { projectId: p.projectId, micros: 5, reference: 'top-up' });
  return { projectId: p.projectId, keyId: p.keyId, settled, open };
}

const replica = (fn: (trx: Knex.Transaction) => Promise<unknown>) =>
  db.transaction(async (trx) => {
    await trx.raw('SET LOCAL session_replication_role = replica');
    await fn(trx);
  });

const checks = (problems: AuditProblem[]) => problems.map((p) => p.check);

test('honest writes: the pass and the full audit hold; the pass reads only what is new, in batches, and counts nothing twice', async () => {
  const w = await honestWork();
  // batch 2: transactions (2 and 3 postings) are cut by batch boundaries
  const first = await auditLedgerPass(db, { batch: 2 });
  expect(first).toMatchObject({ ran: true, ok: true, caughtUp: true, problems: [] });
  // 3 + 3 (two credits... the seed's and the top-up: 2 rows each), 2 reserves, 1 settlement
  expect(first.ledgerEntries).toBe(2 + 2 + 2 + 3 + 2);
  expect(first.checkedExecutions).toBe(2);
  expect(first.checkedProjects).toBe(1);
  const idle = await auditLedgerPass(db, { batch: 2 });
  expect(idle).toMatchObject({ ran: true, ok: true, ledgerEntries: 0, checkedExecutions: 0 });
  expect(await settle(w.open, w.projectId, 2_000)).not.toBeNull();
  const next = await auditLedgerPass(db, { batch: 2 });
  expect(next).toMatchObject({ ok: true, ledgerEntries: 3, checkedExecutions: 1 });
  const full = await auditLedger(db, { ledgerBatch: 2, executionBatch: 1 });
  expect(full).toMatchObject({ ok: true, problems: [], checkedExecutions: 2, checkedProjects: 1, ledgerEntries: 14 });
  expect(full.totals).toEqual({ creditedMicros: 100_005, availableMicros: 100_005 - 2_400, reservedMicros: 0, chargedMicros: 2_400 });
});

test('a pass writes each total it moves once, however many batches moved it (a catch-up left 3.9 GB of dead versions)', async () => {
  const w = await honestWork();
  for (let i = 0; i < 10; i++) await creditBalance(db, { projectId: w.projectId, micros: 1, reference: `top-up ${i}` });
  // batch 2: 31 journal rows, 16 batches, each moving this project's available total
  expect(await auditLedgerPass(db, { batch: 2 })).toMatchObject({ ok: true, caughtUp: true, ledgerEntries: 31 });
  // every version of every row the table holds on its pages, dead ones included (nothing has vacuumed it)
  await db.raw('CREATE EXTENSION IF NOT EXISTS pageinspect');
  const versions = await db.raw<{ rows: { n: number }[] }>(
    `SELECT count(*)::int AS n FROM generate_series(0, pg_relation_size('ledger_audit_totals') / 8192 - 1) AS page,
            LATERAL heap_page_items(get_raw_page('ledger_audit_totals', page::int)) AS item
      WHERE item.lp_flags = 1`,
  );
  const rows = Number((await db('ledger_audit_totals').count<{ count: string }[]>({ count: '*' }))[0]!.count);
  expect(rows).toBe(4); // funding, available, reserved, charged
  expect(versions.rows[0]!.n).toBe(rows);
});

test('a pass stopped by its row budget gives no verdict, and the next one goes on from its cursor', async () => {
  await honestWork();
  const behind = await auditLedgerPass(db, { batch: 2, maxRows: 4 });
  expect(behind).toMatchObject({ ok: null, caughtUp: false, ledgerEntries: 4 });
  const rest = await auditLedgerPass(db, { batch: 2 });
  expect(rest).toMatchObject({ ok: true, caughtUp: true, ledgerEntries: 11 - 4 });
});

test('passes in several processes at once: one audits, the others report the last verdict, nothing is counted twice', async () => {
  await honestWork();
  expect(await auditLedgerPass(db)).toMatchObject({ ran: true, ok: true });
  await seedProject(db, { creditMicros: 9 });
  const others = [1, 2, 3].map(() => createDb({ url: database.url, poolMax: 1 }));
  try {
    const reports = await Promise.all([db, ...others].map((d) => auditLedgerPass(d)));
    expect(reports.filter((r) => r.ran).length).toBeGreaterThanOrEqual(1);
    expect(reports.filter((r) => r.ran && r.ledgerEntries === 2)).toHaveLength(1);
    expect(reports.map((r) => r.ok)).toEqual([true, true, true, true]);
    // double-counted sums would break the balance check of the new project now
    expect(await auditLedgerPass(db)).toMatchObject({ ran: true, ok: true, ledgerEntries: 0 });
  } finally {
    await Promise.all(others.map((d) => d.destroy()));
  }
});

test('a journal row whose transaction commits after a pass, with a smaller id than rows already audited, is still audited', async () => {
  const w = await honestWork();
  expect((await auditLedgerPass(db)).ok).toBe(true);
  // T1 takes its journal ids first and commits last
  const t1 = await db.transaction();
  try {
    await t1.raw('UPDATE projects SET available_micros = available_micros + 7 WHERE id = ?', [w.projectId]);
    await t1.raw(
      `INSERT INTO ledger_entries (transaction_id, project_id, kind, account, amount_micros)
       VALUES ('late', :p, 'credit', 'funding', -7), ('late', :p, 'credit', 'available', 7)`,
      { p: w.projectId },
    );
    await seedProject(db, { creditMicros: 3 }); // larger ids, committed now
    // the pass sees the new project's rows (its balances hold with them) but its cursor stops
    // below T1, which may still commit
    const during = await auditLedgerPass(db);
    expect(during).toMatchObject({ ok: true, ledgerEntries: 0 });
    await t1.commit();
    // an id cursor would have passed 'late' for ever (its sums missing from the totals: a false alarm)
    const after = await auditLedgerPass(db);
    expect(after).toMatchObject({ ok: true, ledgerEntries: 4 });
  } finally {
    if (!t1.isCompleted()) await t1.rollback();
  }
});

test('a mis-summed transaction: caught by the pass, still reported by the next passes, and by the full audit', async () => {
  const w = await honestWork();
  expect((await auditLedgerPass(db)).ok).toBe(true);
  await replica((trx) =>
    trx.raw(
      `INSERT INTO ledger_entries (transaction_id, project_id, kind, account, amount_micros)
       VALUES ('forged', :p, 'credit', 'funding', -10), ('forged', :p, 'credit', 'available', 11)`,
      { p: w.projectId },
    ),
  );
  const pass = await auditLedgerPass(db);
  expect(pass.ok).toBe(false);
  expect(pass.problems).toContainEqual({ check: 'transaction_balanced', detail: 'transaction forged sums to 1' });
  expect(checks(pass.problems)).toContain('available_matches_journal');
  const again = await auditLedgerPass(db);
  expect(again).toMatchObject({ ok: false, ledgerEntries: 0 });
  expect(checks(again.problems)).toContain('transaction_balanced');
  const full = await auditLedger(db, { ledgerBatch: 3 });
  expect(full.ok).toBe(false);
  expect(full.problems).toContainEqual({ check: 'transaction_balanced', detail: 'transaction forged sums to 1' });
});

test('a reservation without an open execution: caught by the pass and by the full audit', async () => {
  const w = await honestWork();
  expect((await auditLedgerPass(db)).ok).toBe(true);
  // the execution is ended behind the ledger's back: no settlement, its reservation still held
  await replica((trx) => trx.raw(`UPDATE executions SET status = 'failed' WHERE id = ?`, [w.open]));
  const pass = await auditLedgerPass(db);
  expect(pass.ok).toBe(false);
  expect(pass.problems).toContainEqual(expect.objectContaining({ check: 'reserved_matches_open_executions', projectId: w.projectId }));
  const full = await auditLedger(db);
  expect(full.ok).toBe(false);
  expect(full.problems).toContainEqual(expect.objectContaining({ check: 'reserved_matches_open_executions', projectId: w.projectId }));
  expect(full.problems).toContainEqual(expect.objectContaining({ check: 'settled_once', executionId: w.open }));
});

test('a reservation for an execution that does not exist: caught by the pass and by the full audit', async () => {
  const w = await honestWork();
  expect((await auditLedgerPass(db)).ok).toBe(true);
  const ghost = newId('exe');
  await replica(async (trx) => {
    await trx.raw('UPDATE projects SET available_micros = available_micros - 50, reserved_micros = reserved_micros + 50 WHERE id = ?', [w.projectId]);
    await trx.raw(
      `INSERT INTO ledger_entries (transaction_id, project_id, execution_id, kind, account, amount_micros)
       VALUES ('ghost', :p, :e, 'reserve', 'available', -50), ('ghost', :p, :e, 'reserve', 'reserved', 50)`,
      { p: w.projectId, e: ghost },
    );
  });
  const pass = await auditLedgerPass(db);
  expect(checks(pass.problems).sort()).toEqual(['journal_names_an_execution', 'reserved_matches_open_executions']);
  const full = await auditLedger(db);
  expect(checks(full.problems).sort()).toEqual(['journal_names_an_execution', 'reserved_matches_open_executions']);
});

test('a double settlement: caught by the pass (for that execution) and by the full audit', async () => {
  const w = await honestWork();
  expect((await auditLedgerPass(db)).ok).toBe(true);
  // the settlement replayed: balanced postings, the balance row moved with them, so only the
  // per-execution check can see it
  await replica(async (trx) => {
    await trx.raw(
      `INSERT INTO ledger_entries (transaction_id, project_id, execution_id, kind, account, amount_micros)
       VALUES ('again', :p, :e, 'settle', 'reserved', 0), ('again', :p, :e, 'settle', 'available', -400),
              ('again', :p, :e, 'settle', 'charged', 400)`,
      { p: w.projectId, e: w.settled },
    );
    await trx.raw('UPDATE projects SET available_micros = available_micros - 400 WHERE id = ?', [w.projectId]);
  });
  const pass = await auditLedgerPass(db);
  expect(pass.problems).toEqual([
    expect.objectContaining({ check: 'settled_once', executionId: w.settled }),
    expect.objectContaining({ check: 'charge_matches_journal', executionId: w.settled }),
  ]);
  expect((await auditLedgerPass(db)).problems).toHaveLength(2);
  const full = await auditLedger(db, { executionBatch: 1 });
  expect(full.problems).toEqual(pass.problems);
});

test('a charge rewritten on an ended execution (triggers on): caught by the pass', async () => {
  const w = await honestWork();
  expect((await auditLedgerPass(db)).ok).toBe(true);
  await db('executions').where({ id: w.settled }).update({ charged_micros: 300 });
  const pass = await auditLedgerPass(db);
  expect(pass.problems).toEqual([expect.objectContaining({ check: 'charge_matches_journal', executionId: w.settled })]);
});

test('history written before migration 20261126000040 becomes its baseline: the pass holds at once, and a rerun of the migration changes nothing', async () => {
  const migration = MIGRATIONS.find(([name]) => name === '20261126000040_ledger_audit_cursor')![1];
  await migration.down!(db);
  // the previous release's writes, on the schema before the migration
  const w = await honestWork();
  await migration.up(db);
  await migration.up(db);
  expect(await db('ledger_entries').whereNull('audit_xid').count<{ n: number }[]>({ n: '*' })).toEqual([{ n: 11 }]);
  expect(await auditLedgerPass(db)).toMatchObject({ ok: true, ledgerEntries: 0, checkedExecutions: 0, checkedProjects: 1 });
  // an old execution that ends now is checked (its row is stamped), with its whole journal
  expect(await settle(w.open, w.projectId, 1_000)).not.toBeNull();
  expect(await auditLedgerPass(db)).toMatchObject({ ok: true, ledgerEntries: 3, checkedExecutions: 1 });
  // a journal row without its transaction's id is refused from now on
  await expect(
    db.raw(`INSERT INTO ledger_entries (transaction_id, project_id, kind, account, amount_micros, audit_xid) VALUES ('x', ?, 'credit', 'funding', 0, NULL)`, [
      w.projectId,
    ]),
  ).rejects.toThrow(/ledger_entries_audit_xid_set/);
});
