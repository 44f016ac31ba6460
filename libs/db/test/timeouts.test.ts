import { dbTimeoutsFor, loadConfig } from '@tes/config';
import { seedProject, useTestDatabase } from '@tes/testing';
import { createDb, isTimeoutError, type Db } from '../src';

/**
 * Bounds on waiting in Postgres (issue #26): each pooled connection carries statement_timeout,
 * lock_timeout and idle_in_transaction_session_timeout, so a statement behind a row lock, a
 * runaway statement and a transaction left idle each end, with an error callers can tell.
 */
const { db, database } = useTestDatabase({ poolMax: 2 });
const pools: Db[] = [];
afterAll(async () => {
  for (const p of pools) await p.destroy();
});

function bounded(timeouts: Parameters<typeof createDb>[0]['timeouts']): Db {
  const pool = createDb({ url: database.url, poolMax: 2, applicationName: 'tes-timeouts-test', timeouts });
  pools.push(pool);
  return pool;
}

/** How the statement failed, and when; a statement still waiting after 10 s fails the test. */
async function failure(p: Promise<unknown>): Promise<{ code?: string; ms: number }> {
  const started = Date.now();
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error('the statement was still waiting after 10 s: no bound applied')), 10_000);
  });
  try {
    await Promise.race([p, late]);
  } catch (err) {
    if (err instanceof Error && err.message.startsWith('the statement was still waiting')) throw err;
    return { code: (err as { code?: string }).code, ms: Date.now() - started };
  } finally {
    clearTimeout(timer);
  }
  throw new Error('expected the statement to fail');
}

it('sets the three bounds on every connection of the pool', async () => {
  const pool = bounded({ statementTimeoutMs: 4_000, lockTimeoutMs: 700, idleInTransactionTimeoutMs: 5_000 });
  const shown = await pool.raw<{ rows: Record<string, string>[] }>(
    `SELECT current_setting('statement_timeout') AS s, current_setting('lock_timeout') AS l, current_setting('idle_in_transaction_session_timeout') AS i`,
  );
  expect(shown.rows[0]).toEqual({ s: '4s', l: '700ms', i: '5s' });
});

it('a statement blocked on a row lock fails at lock_timeout with a retryable timeout error, and the row is unchanged', async () => {
  const p = await seedProject(db, { creditMicros: 1_000 });
  const pool = bounded({ lockTimeoutMs: 500 });
  const holder = await db.transaction();
  try {
    await holder.raw('SELECT 1 FROM projects WHERE id = ? FOR UPDATE', [p.projectId]);
    const f = await failure(pool.raw(`UPDATE projects SET name = 'changed' WHERE id = ?`, [p.projectId]));
    expect(f.code).toBe('55P03');
    expect(isTimeoutError(f)).toBe(true);
    // at the bound, not when the holder lets go (it never does in this test before the check)
    expect(f.ms).toBeGreaterThanOrEqual(450);
    expect(f.ms).toBeLessThan(5_000);
  } finally {
    // also lets a statement that had no bound go on (then the test has failed already)
    await holder.rollback();
  }
  expect((await db('projects').where({ id: p.projectId }).first('name')).name).not.toBe('changed');
  // the pool's connection is still usable after the failure
  expect((await pool.raw<{ rows: { one: number }[] }>('SELECT 1 AS one')).rows[0]!.one).toBe(1);
});

it('a statement running past statement_timeout is cancelled (57014), a retryable timeout', async () => {
  const pool = bounded({ statementTimeoutMs: 300 });
  const f = await failure(pool.raw('SELECT pg_sleep(10)'));
  expect(f.code).toBe('57014');
  expect(isTimeoutError(f)).toBe(true);
  expect(f.ms).toBeLessThan(5_000);
});

it('a session idle inside a transaction past the bound is ended by the server and its locks released', async () => {
  const p = await seedProject(db, { creditMicros: 1_000 });
  const pool = bounded({ idleInTransactionTimeoutMs: 500 });
  const idle = await pool.transaction();
  await idle.raw('SELECT 1 FROM projects WHERE id = ? FOR UPDATE', [p.projectId]);
  const pid = (await idle.raw<{ rows: { pid: number }[] }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
  // the process "hangs" between two statements; the server ends the session after 500 ms
  const deadline = Date.now() + 15_000;
  while ((await db.raw<{ rows: unknown[] }>('SELECT 1 FROM pg_stat_activity WHERE pid = ?', [pid])).rows.length > 0) {
    if (Date.now() > deadline) throw new Error(`session ${pid} still alive 15 s after its idle bound`);
    await new Promise((r) => setTimeout(r, 100));
  }
  // its row lock went with it: another writer gets the row at once
  await db.transaction(async (trx) => {
    await trx.raw('SET LOCAL lock_timeout = 1000');
    await trx.raw('SELECT 1 FROM projects WHERE id = ? FOR UPDATE', [p.projectId]);
  });
  // the abandoned transaction cannot commit anything
  await expect(idle.raw(`UPDATE projects SET name = 'late' WHERE id = ?`, [p.projectId])).rejects.toThrow();
  await idle.rollback().catch(() => undefined);
  expect((await db('projects').where({ id: p.projectId }).first('name')).name).not.toBe('late');
  // and the pool replaces the dead connection
  expect((await pool.raw<{ rows: { one: number }[] }>('SELECT 1 AS one')).rows[0]!.one).toBe(1);
});

it('each role has defaults, and the variables override them (0: none)', () => {
  const base = loadConfig({});
  expect(dbTimeoutsFor(base, 'gateway')).toEqual({ statementTimeoutMs: 10_000, lockTimeoutMs: 5_000, idleInTransactionTimeoutMs: 10_000 });
  expect(dbTimeoutsFor(base, 'admin').statementTimeoutMs).toBe(0);
  const set = loadConfig({ DB_STATEMENT_TIMEOUT_MS: '0', DB_LOCK_TIMEOUT_MS: '250', DB_IDLE_IN_TRANSACTION_TIMEOUT_MS: '1000' });
  expect(dbTimeoutsFor(set, 'relay')).toEqual({ statementTimeoutMs: 0, lockTimeoutMs: 250, idleInTransactionTimeoutMs: 1_000 });
  expect(() => loadConfig({ DB_LOCK_TIMEOUT_MS: 'soon' })).toThrow(/DB_LOCK_TIMEOUT_MS must be a whole number/);
});
