import type { Knex } from 'knex';
import { newId } from '@tes/core';
import { MIGRATIONS, publishPrices, submitExecution } from '@tes/db';
import { seedProject, useTestDatabase, type SeededProject } from '@tes/testing';
import { exportLedger } from '../src/ledger-export';
import { journalTotals, listExecutionSummaries, listKeys } from '@tes/db';

/**
 * The admin reads are index scans: each statement, as the read functions send it, can be
 * answered by the index named beside it (migration 20261123000016 and the per-project indexes).
 * The planner is told to avoid sequential scans, so a small test table still shows which index
 * fits; a query reshaped so that its index no longer fits (a predicate the partial index does not
 * imply, an order the index does not give) fails here. docs/operations.md#the-admin-cli has the timings on
 * 400k executions and 2M journal entries.
 */
const { db } = useTestDatabase({ poolMax: 2 });

let p: SeededProject;

beforeAll(async () => {
  p = await seedProject(db, { creditMicros: 1_000_000 });
  const { priceVersion } = await publishPrices(db, { plans: 1 });
  for (let i = 0; i < 3; i++) {
    const id = newId('exe');
    await submitExecution(db, {
      id,
      projectId: p.projectId,
      apiKeyId: p.keyId,
      tool: 'image.render',
      model: 'm',
      category: 'image',
      arguments: {},
      priceVersion,
      totalSteps: 1,
      reservedMicros: 10,
      idempotencyKey: `k-${id}`,
      requestDigest: 'd',
      dispatchDeadlineMs: 60_000,
    });
  }
  await db.raw('ANALYZE executions; ANALYZE ledger_entries');
});

/** The plans of the statements `read` sends, in order. */
async function plans(read: (db: Knex) => Promise<unknown>): Promise<string[]> {
  const sent: { sql: string; bindings: readonly unknown[] }[] = [];
  const listener = (q: { sql: string; bindings?: readonly unknown[] }) => {
    if (/^\s*(select|with)\b/i.test(q.sql)) sent.push({ sql: q.sql, bindings: q.bindings ?? [] });
  };
  db.on('query', listener);
  try {
    await read(db);
  } finally {
    db.off('query', listener);
  }
  expect(sent.length).toBeGreaterThan(0);
  return db.transaction(async (trx) => {
    await trx.raw('SET LOCAL enable_seqscan = off');
    const out: string[] = [];
    for (const q of sent) {
      const res = await trx.raw<{ rows: { 'QUERY PLAN': string }[] }>(`EXPLAIN ${q.sql.replace(/\$\d+/g, '?')}`, q.bindings as Knex.RawBinding[]);
      out.push(res.rows.map((r) => r['QUERY PLAN']).join('\n'));
    }
    return out;
  });
}

it('execution list across projects: needs_review by its partial index, a key by its own, the newest by the primary key', async () => {
  const [review] = await plans((d) => listExecutionSummaries(d, { status: 'needs_review', limit: 50 }));
  expect(review).toContain('executions_needs_review_idx');
  const [byKey] = await plans((d) => listExecutionSummaries(d, { apiKeyId: p.keyId, limit: 50 }));
  expect(byKey).toContain('executions_api_key_idx');
  const [newest] = await plans((d) =>
    listExecutionSummaries(d, { tool: 'image.render', sinceId: 'exe_01JD0000000000000000000000', since: new Date(0), limit: 50 }),
  );
  expect(newest).toMatch(/Index Scan Backward using executions_pkey/);
});

it('execution list in a project: the per-project indexes, with the id range of --since', async () => {
  const [status] = await plans((d) =>
    listExecutionSummaries(d, { projectId: p.projectId, status: 'failed', sinceId: 'exe_01JD0000000000000000000000', limit: 50 }),
  );
  expect(status).toMatch(/executions_project_status_idx[\s\S]*Index Cond: .*id >= /);
  const [tool] = await plans((d) => listExecutionSummaries(d, { projectId: p.projectId, tool: 'image.render', limit: 50 }));
  expect(tool).toContain('executions_project_tool_idx');
});

it("key list finds each key's newest execution through executions_api_key_idx", async () => {
  const [keys] = await plans((d) => listKeys(d, p.projectId));
  expect(keys).toMatch(/Index Scan (Backward )?using executions_api_key_idx on executions/);
});

it('ledger export and balance show read one project through ledger_project_time_idx', async () => {
  const statements = await plans(async (d) => {
    const chunks: string[] = [];
    for await (const chunk of exportLedger(d, {
      projectId: p.projectId,
      month: { start: new Date('2026-01-01T00:00:00Z'), end: new Date('2099-01-01T00:00:00Z') },
      format: 'jsonl',
      batchSize: 2,
    })) {
      chunks.push(chunk);
    }
    expect(chunks.join('\n').split('\n')).toHaveLength(3 * 2 + 2); // three reservations and the credit
  });
  // the opening balances, the first batch, the keyset batches after it
  expect(statements.length).toBeGreaterThanOrEqual(3);
  expect(statements[0]).toMatch(/Index Only Scan using ledger_project_time_idx/);
  for (const batch of statements.slice(1)) expect(batch).toMatch(/Index Scan using ledger_project_time_idx on ledger_entries/);
  expect(statements[2]).toMatch(/Index Cond: .*ROW\(created_at, id\) >/);
  const [totals] = await plans((d) => journalTotals(d, p.projectId));
  expect(totals).toMatch(/ledger_project_time_idx|ledger_project_idx/);
});

it('migration 20261123000016 rebuilds an index that a failed concurrent build left invalid', async () => {
  const migration = MIGRATIONS.find(([name]) => name === '20261123000016_admin_read_indexes')![1];
  const valid = async () =>
    (
      await db.raw<{ rows: { name: string; valid: boolean; unique: boolean }[] }>(
        `SELECT c.relname AS name, i.indisvalid AS valid, i.indisunique AS unique FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
          WHERE c.relname IN ('executions_needs_review_idx', 'executions_api_key_idx', 'ledger_project_time_idx') ORDER BY 1`,
      )
    ).rows;
  expect(await valid()).toEqual([
    { name: 'executions_api_key_idx', valid: true, unique: false },
    { name: 'executions_needs_review_idx', valid: true, unique: false },
    { name: 'ledger_project_time_idx', valid: true, unique: false },
  ]);
  // A concurrent build that fails (here: a unique index over duplicates) leaves its index behind, invalid.
  await migration.down!(db);
  expect(await valid()).toEqual([]);
  await expect(db.raw('CREATE UNIQUE INDEX CONCURRENTLY executions_api_key_idx ON executions (api_key_id)')).rejects.toThrow(/could not create unique index/);
  expect(await valid()).toEqual([{ name: 'executions_api_key_idx', valid: false, unique: true }]);
  await migration.up(db);
  expect(await valid()).toEqual([
    { name: 'executions_api_key_idx', valid: true, unique: false },
    { name: 'executions_needs_review_idx', valid: true, unique: false },
    { name: 'ledger_project_time_idx', valid: true, unique: false },
  ]);
});
