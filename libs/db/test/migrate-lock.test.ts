import { spawn } from 'node:child_process';
import pg from 'pg';
import { migrateLatest } from '@tes/db';
import { useTestDatabase } from '@tes/testing';

/**
 * Issue #27, item 2: a migrate killed midway left knex_migrations_lock.is_locked = 1, and every
 * later run (the Job's retries) failed in under a second ("Migration table is already locked").
 * A run now holds a session lock while it runs: a mark whose holder's session is gone is stale
 * and freed; a mark whose holder is alive is waited for, never broken.
 */
const { db, database } = useTestDatabase({ poolMax: 2 });

const isLocked = async () => (await db.raw<{ rows: { is_locked: number }[] }>('SELECT is_locked FROM knex_migrations_lock')).rows[0]?.is_locked;

/**
 * A migrate as a real process, killed with SIGKILL midway: it takes the running lock and sets
 * knex's mark, as migrateLatest does before its first migration, then hangs.
 */
async function killedMidway(): Promise<void> {
  const script = `
    const pg = require('pg');
    (async () => {
      const c = new pg.Client({ connectionString: process.argv[1] });
      await c.connect();
      await c.query("SELECT pg_advisory_lock(hashtext('tes.migrate.running'))");
      await c.query('UPDATE knex_migrations_lock SET is_locked = 1');
      process.stdout.write('midway\\n');
      setInterval(() => {}, 1000);
    })();`;
  const child = spawn(process.execPath, ['-e', script, database.url], { stdio: ['ignore', 'pipe', 'inherit'] });
  await new Promise<void>((resolve, reject) => {
    child.stdout.on('data', (d: Buffer) => d.toString().includes('midway') && resolve());
    child.once('exit', (code) => reject(new Error(`the migrate child exited early (${code})`)));
  });
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGKILL');
  await exited;
}

it('a migrate killed midway leaves a lock the next run frees, and that run applies', async () => {
  await killedMidway();
  expect(await isLocked()).toBe(1);
  let freed = false;
  await expect(migrateLatest(db, { onStaleLock: () => (freed = true) })).resolves.toEqual([]);
  expect(freed).toBe(true);
  expect(await isLocked()).toBe(0);
});

it('a migrate that is really running is waited for, and its lock is never broken', async () => {
  const running = new pg.Client({ connectionString: database.url });
  await running.connect();
  try {
    await running.query(`SELECT pg_advisory_lock(hashtext('tes.migrate.running'))`);
    await running.query('UPDATE knex_migrations_lock SET is_locked = 1');
    let waited = false;
    await expect(migrateLatest(db, { waitMs: 1500, onWaiting: () => (waited = true) })).rejects.toThrow(/another migrate is still running/);
    expect(waited).toBe(true);
    expect(await isLocked()).toBe(1); // the live run's mark is left alone

    // the live run ends as knex ends one: its mark cleared, then its session lock released
    const second = migrateLatest(db, { waitMs: 10_000 });
    await new Promise((r) => setTimeout(r, 300));
    await running.query('UPDATE knex_migrations_lock SET is_locked = 0');
    await running.query(`SELECT pg_advisory_unlock(hashtext('tes.migrate.running'))`);
    await expect(second).resolves.toEqual([]);
  } finally {
    await running.end();
  }
});
