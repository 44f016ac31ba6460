import type { afterAll as AfterAll, beforeAll as BeforeAll } from '@jest/globals';
import type { Knex } from 'knex';
import { createDb } from '@tes/db';
import { createTestDatabase, type TestDatabase } from './database';

/**
 * The usual prologue of a test file that talks to Postgres: a database of its own (cloned from
 * the migrated template) and a pool on it, made before the file's tests and dropped after them.
 * Returns handles that forward to them once they exist: `db` is the pool (call it as knex),
 * `database.url` its address. Declare it before the file's own hooks.
 */
// Jest's injected globals, not an import of @jest/globals: that module throws when loaded outside
// Jest, and this file is part of @tes/testing, which the bench and npm start load too.
const { afterAll, beforeAll } = globalThis as unknown as { afterAll: typeof AfterAll; beforeAll: typeof BeforeAll };

export function useTestDatabase(options: { poolMax: number }): { db: Knex; database: TestDatabase } {
  let database: TestDatabase | undefined;
  let db: Knex | undefined;
  beforeAll(async () => {
    database = await createTestDatabase();
    db = createDb({ url: database.url, poolMax: options.poolMax });
  });
  afterAll(async () => {
    await db?.destroy();
    await database?.drop();
  });
  const started = <T>(value: T | undefined): T => {
    if (value === undefined) throw new Error('the test database is made in beforeAll: use it inside tests or hooks');
    return value;
  };
  // knex is a function with properties: forward both calls and property reads to the pool (the
  // target is only there to make the handle callable; nothing of it is read)
  const dbHandle = new Proxy(createDb as unknown as Knex, {
    apply: (_target, _self, args: unknown[]) => Reflect.apply(started(db) as unknown as (...a: unknown[]) => unknown, started(db), args),
    get: (_target, prop) => {
      const pool = started(db);
      const value = Reflect.get(pool, prop, pool) as unknown;
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(pool) : value;
    },
  });
  const databaseHandle = new Proxy({} as TestDatabase, { get: (_target, prop) => Reflect.get(started(database), prop) as unknown });
  return { db: dbHandle, database: databaseHandle };
}
