import pg from 'pg';
import {
  auditLedger,
  claimNextFair,
  createDb,
  enterWaiting,
  MIGRATIONS,
  publishPrices,
  repairExecutionLine,
  resumeExecution,
  settleExecution,
  startStep,
  vacuumExecutionLine,
} from '@tes/db';
import { seedProject, submitTestExecution, useTestDatabase, type SeededProject } from '@tes/testing';
import { statementsDuring, withNestedPlans } from '../../../tests/plans';

/**
 * execution_line (migration 20261127000020): the queued and running executions, kept by
 * triggers on executions, and what the fair claim, the place in line and the queue gauges read.
 * It must hold exactly the live line after any mix of moves, and its cost must be the line's:
 * the churn of executions that passed through it is gone after the relay's vacuum, so the claim
 * reads what it read on a fresh line, however many executions came before.
 */
const { db, database } = useTestDatabase({ poolMax: 3 });

let priceVersion: string;
beforeAll(async () => {
  ({ priceVersion } = await publishPrices(db, { 'test.sleep': 1 }));
});

afterEach(async () => {
  expect((await auditLedger(db)).problems).toEqual([]);
});

/** The line as the table holds it, and as executions say it is: they must be equal. */
async function bothLines(): Promise<{ table: string[]; truth: string[] }> {
  const table = await db.raw<{ rows: { r: string }[] }>(
    `SELECT concat_ws('|', execution_id, category, project_id, status, created_at) AS r FROM execution_line ORDER BY 1`,
  );
  const truth = await db.raw<{ rows: { r: string }[] }>(
    `SELECT concat_ws('|', id, category, project_id, status, created_at) AS r FROM executions WHERE status IN ('queued', 'running') ORDER BY 1`,
  );
  return { table: table.rows.map((r) => r.r), truth: truth.rows.map((r) => r.r) };
}

const submit = (p: SeededProject, category = 'test') => submitTestExecution(db, p, { priceVersion, category });

it('follows every move of an execution: submit, claim, waiting, resume, settle, a backdating by hand', async () => {
  const p = await seedProject(db, { creditMicros: 100_000 });
  const line = async (id: string) => (await db('execution_line').where({ execution_id: id }).first())?.status ?? 'absent';

  const id = await submit(p, 'line-moves');
  expect(await line(id)).toBe('queued');
  const claimed = (await claimNextFair(db, { category: 'line-moves', owner: 'wrk_line', leaseTtlMs: 60_000, share: 1, ownSlots: 1 }))!;
  expect(claimed.id).toBe(id);
  expect(await line(id)).toBe('running');
  expect(await startStep(db, { executionId: id, projectId: p.projectId, index: 0, name: 's0', owner: claimed.lease, external: true })).toBe('started');
  expect(await enterWaiting(db, { executionId: id, owner: claimed.lease, recheckDeadlineMs: 60_000 })).toBe(true);
  expect(await line(id)).toBe('absent'); // waiting is not the line: a re-check comes back by id
  await db('executions').where({ id }).update({ lease_owner: null });
  const resumed = (await resumeExecution(db, id, 'wrk_line2', 60_000))!;
  expect(await line(id)).toBe('running');

  // an operator's repair that moves created_at is followed (the place in line reads it)
  const other = await submit(p, 'line-moves');
  await db.raw(`UPDATE executions SET created_at = created_at - interval '1 hour' WHERE id = ?`, [other]);
  const backdated = await bothLines();
  expect(backdated.table).toEqual(backdated.truth);

  expect(
    await settleExecution(db, { executionId: id, projectId: p.projectId, status: 'succeeded', chargedMicros: 1, from: ['running'], leaseOwner: resumed.lease }),
  ).not.toBeNull();
  expect(await settleExecution(db, { executionId: other, projectId: p.projectId, status: 'cancelled', chargedMicros: 0, from: ['queued'] })).not.toBeNull();
  expect(await line(id)).toBe('absent');
  expect(await line(other)).toBe('absent');
  const { table, truth } = await bothLines();
  expect(table).toEqual(truth);
});

it('holds exactly the live line after many concurrent submits, claims and settles', async () => {
  const projects = await Promise.all(Array.from({ length: 4 }, () => seedProject(db, { creditMicros: 1_000_000 })));
  const category = 'line-mix';
  const worker = async (w: number): Promise<void> => {
    for (let i = 0; i < 30; i++) {
      await submit(projects[(w + i) % projects.length]!, category);
      if (i % 2 === 0) {
        const c = await claimNextFair(db, { category, owner: `wrk_mix${w}`, leaseTtlMs: 60_000, share: 1, ownSlots: 8 });
        if (c && i % 4 === 0) {
          await settleExecution(db, { executionId: c.id, projectId: c.projectId, status: 'failed', chargedMicros: 0, from: ['running'], leaseOwner: c.lease });
        }
      }
    }
  };
  await Promise.all([0, 1, 2].map(worker));
  const { table, truth } = await bothLines();
  expect(truth.length).toBeGreaterThan(40);
  expect(table).toEqual(truth);
});

interface BufferNode {
  'Relation Name'?: string;
  'Shared Hit Blocks': number;
  'Shared Read Blocks': number;
  Plans?: BufferNode[];
}

/**
 * The shared buffers the fair claim's pick reads from execution_line (its scans' own, not its
 * triggers'), run in a transaction rolled back: the pick is tes_claim_fair's statement, read as
 * it ran through auto_explain.
 */
async function claimBuffers(category: string): Promise<number> {
  const [s] = (
    await statementsDuring(database.name, async () => {
      const trx = await db.transaction();
      try {
        await claimNextFair(trx, { category, owner: 'wrk_probe', leaseTtlMs: 60_000, share: 1, ownSlots: 64 });
      } finally {
        await trx.rollback();
      }
    })
  ).filter((st) => st.text.includes('tes_claim_fair('));
  const client = new pg.Client({ connectionString: database.url });
  await client.connect();
  try {
    await client.query('BEGIN');
    // the line's indexes, whatever the planner would choose for a table this small (a sequential
    // scan of a page or two): the churn they carry is what is measured
    await client.query('SET LOCAL enable_seqscan = off');
    const nested = await withNestedPlans(client, () => client.query(s!.text, s!.values));
    const pick = nested.filter((n) => n.query.includes('WITH RECURSIVE share'));
    expect(pick).toHaveLength(1);
    const onLine = (n: BufferNode): number =>
      n['Relation Name'] === 'execution_line' ? n['Shared Hit Blocks'] + n['Shared Read Blocks'] : (n.Plans ?? []).reduce((sum, c) => sum + onLine(c), 0);
    return onLine(pick[0]!.plan as unknown as BufferNode);
  } finally {
    await client.query('ROLLBACK');
    await client.end();
  }
}

it("the claim's cost is the line's: executions that passed through it cost nothing once the relay's vacuum ran, however many", async () => {
  const category = 'line-churn';
  // a line of 12 projects, one queued each; the churn is a thirteenth project's, in the middle of the line's key order
  const projects = await Promise.all(Array.from({ length: 13 }, () => seedProject(db, { creditMicros: 10_000_000 })));
  projects.sort((a, b) => (a.projectId < b.projectId ? -1 : 1));
  const churner = projects.splice(6, 1)[0]!;
  // where autovacuum is on, it would clean the line during the churn (2,000 changes): the relay's vacuum is what is measured
  await db.raw('ALTER TABLE execution_line SET (autovacuum_enabled = off)');
  for (const p of projects) await submit(p, category);
  await vacuumExecutionLine(db);
  const fresh = await claimBuffers(category);

  /** n executions enter the line and leave it (submitted, then cancelled), 8 at a time. */
  const churn = async (n: number): Promise<void> => {
    let next = 0;
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        while (next++ < n) {
          const id = await submit(churner, category);
          await settleExecution(db, { executionId: id, projectId: churner.projectId, status: 'cancelled', chargedMicros: 0, from: ['queued'] });
        }
      }),
    );
  };
  await churn(2_000);
  const churned = await claimBuffers(category);
  expect((await vacuumExecutionLine(db)).vacuumed).toBe(true);
  const cleaned = await claimBuffers(category);
  await churn(2_000);
  await vacuumExecutionLine(db);
  const cleanedAgain = await claimBuffers(category);

  // without the vacuum the claim steps over the dead entries (the check can fail) ...
  expect(churned).toBeGreaterThan(fresh + 40);
  // ... after it, at most two more pages per probe than on the fresh line: a B-tree keeps the
  // level its peak added, and the leaves its splits left can put a probe's next key one page on
  // (29 or 30 buffers fresh, 44 after, 93 before the vacuum, here; the exact layout varies by run) ...
  expect(cleaned).toBeLessThanOrEqual(fresh + 2 * projects.length);
  // ... and twice the churn costs no more than once
  expect(cleanedAgain).toBeLessThanOrEqual(cleaned + 2);
  const { table, truth } = await bothLines();
  expect(table).toEqual(truth);
  await db.raw('ALTER TABLE execution_line RESET (autovacuum_enabled)');
}, 120_000);

it("the relay's repair puts the line back where its triggers were bypassed: a stale head no longer holds its category", async () => {
  const category = 'line-repair';
  const [a, b] = [await seedProject(db, { creditMicros: 100_000 }), await seedProject(db, { creditMicros: 100_000 })];
  const gone = await submit(a, category);
  const first = await submit(b, category);
  const missing = await submit(b, category);
  const wrong = await submit(a, 'line-repair-other');
  // as writes with session_replication_role = replica would leave it: `gone` settled and
  // `missing` submitted without their line rows' moves, `wrong`'s row in the wrong state
  expect(await settleExecution(db, { executionId: gone, projectId: a.projectId, status: 'cancelled', chargedMicros: 0, from: ['queued'] })).not.toBeNull();
  await db.raw(
    `INSERT INTO execution_line (execution_id, category, project_id, status, created_at)
     SELECT id, category, project_id, 'queued', created_at - interval '1 hour' FROM executions WHERE id = ?`,
    [gone],
  );
  await db('execution_line').where({ execution_id: missing }).delete();
  await db('execution_line').where({ execution_id: wrong }).update({ status: 'running' });
  // the stale head is the oldest: every claim picks it and its status guard refuses it
  const claim = () => claimNextFair(db, { category, owner: 'wrk_repair', leaseTtlMs: 60_000, share: 1, ownSlots: 4 });
  expect(await claim()).toBeNull();

  const repair = await repairExecutionLine(db);
  expect(repair.removed).toEqual([gone]);
  expect(repair.added.sort()).toEqual([missing, wrong].sort());
  const { table, truth } = await bothLines();
  expect(table).toEqual(truth);
  expect(await repairExecutionLine(db)).toEqual({ removed: [], added: [] }); // in step: nothing to do
  expect((await claim())?.id).toBe(first);
  expect((await claim())?.id).toBe(missing);
});

it('the migration fills the line from the executions live when it runs', async () => {
  const p = await seedProject(db, { creditMicros: 100_000 });
  const queued = await submit(p, 'line-backfill');
  const running = (await claimNextFair(db, { category: 'line-backfill', owner: 'wrk_fill', leaseTtlMs: 60_000, share: 1, ownSlots: 4 }))!;
  await submit(p, 'line-backfill');
  const ended = await submit(p, 'line-backfill');
  expect(await settleExecution(db, { executionId: ended, projectId: p.projectId, status: 'cancelled', chargedMicros: 0, from: ['queued'] })).not.toBeNull();
  const migration = MIGRATIONS.find(([name]) => name === '20261127000020_execution_line')![1];
  await db.transaction(async (trx) => {
    await migration.down!(trx);
    await migration.up(trx);
  });
  const { table, truth } = await bothLines();
  expect(table).toEqual(truth);
  expect(table.map((r) => r.split('|')[0])).toEqual(expect.arrayContaining([queued, running.id]));
  expect(table.some((r) => r.startsWith(ended))).toBe(false);
});

it('a role that does not own the table is told so, and its vacuum does nothing', async () => {
  const role = `tes_line_reader_${process.pid}`;
  await db.raw(`DROP ROLE IF EXISTS ${role}`);
  await db.raw(`CREATE ROLE ${role} LOGIN`);
  const url = new URL(database.url);
  url.username = role;
  const other = createDb({ url: url.toString(), poolMax: 1 });
  try {
    expect(await vacuumExecutionLine(other)).toMatchObject({ vacuumed: false });
  } finally {
    await other.destroy();
    await db.raw(`DROP ROLE ${role}`);
  }
});
