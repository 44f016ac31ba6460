import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { createDb, maintenanceUrl, migrateLatest, MIGRATIONS } from '@tes/db';
import { sha256Hex } from '@tes/core';

const DEFAULT_SERVER_URL = process.env.TEST_DATABASE_SERVER_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

export interface TestDatabase {
  url: string;
  name: string;
  drop(): Promise<void>;
}

function withDatabase(serverUrl: string, name: string): string {
  const u = new URL(serverUrl);
  u.pathname = `/${name}`;
  return u.toString();
}

async function withAdmin<T>(serverUrl: string, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = new pg.Client({ connectionString: maintenanceUrl(serverUrl) });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

/**
 * A fresh database per test file, cloned from a migrated template (named after the
 * migrations, so a new migration makes a new template). Cloning takes ~100 ms where
 * migrating would take seconds. An advisory lock serializes template creation and clones
 * across jest workers.
 */
export async function createTestDatabase(serverUrl = DEFAULT_SERVER_URL): Promise<TestDatabase> {
  const template = `tes_tpl_${sha256Hex(MIGRATIONS.map(([n]) => n).join(',')).slice(0, 12)}`;
  const name = `tes_test_${Date.now().toString(36)}_${randomBytes(4).toString('hex')}`;
  await withAdmin(serverUrl, async (c) => {
    await c.query(`SELECT pg_advisory_lock(hashtext('tes_test_template'))`);
    try {
      const exists = await c.query('SELECT 1 FROM pg_database WHERE datname = $1', [template]);
      if (!exists.rowCount) {
        await c.query(`CREATE DATABASE "${template}"`);
        const db = createDb({ url: withDatabase(serverUrl, template), poolMax: 1 });
        try {
          await migrateLatest(db);
        } catch (err) {
          await db.destroy();
          await c.query(`DROP DATABASE "${template}"`);
          throw err;
        }
        await db.destroy();
      }
      await c.query(`CREATE DATABASE "${name}" TEMPLATE "${template}"`);
    } finally {
      await c.query(`SELECT pg_advisory_unlock(hashtext('tes_test_template'))`);
    }
  });
  const url = withDatabase(serverUrl, name);
  return {
    url,
    name,
    drop: () =>
      withAdmin(serverUrl, async (c) => {
        await c.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
      }),
  };
}

/**
 * A database kept across runs under a name of its own (the history bench's `--history-db`: a
 * 10 M-execution history takes most of an hour to seed, so it is seeded once and measured as
 * often as needed). Created from the migrated template when missing (`created`), then migrated
 * to the latest schema each time, as a deploy would; `drop()` does nothing: only the operator
 * deletes it (`dropdb NAME`).
 */
export async function keptDatabase(name: string, serverUrl = DEFAULT_SERVER_URL): Promise<TestDatabase & { created: boolean }> {
  if (!/^[a-z_][a-z0-9_]{0,62}$/.test(name)) throw new Error(`a kept database's name is lower-case letters, digits and _: got "${name}"`);
  const exists = await withAdmin(serverUrl, async (c) => (await c.query('SELECT 1 FROM pg_database WHERE datname = $1', [name])).rowCount === 1);
  if (!exists) {
    const fresh = await createTestDatabase(serverUrl);
    await withAdmin(serverUrl, (c) => c.query(`ALTER DATABASE "${fresh.name}" RENAME TO "${name}"`));
  }
  const url = withDatabase(serverUrl, name);
  const db = createDb({ url, poolMax: 1 });
  try {
    await migrateLatest(db);
  } finally {
    await db.destroy();
  }
  return { url, name, created: !exists, drop: () => Promise.resolve() };
}
