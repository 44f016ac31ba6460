import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { promisify } from 'node:util';
import pg from 'pg';
import { createDb, maintenanceUrl, migrateLatest } from '@tes/db';

/** Where the committed dump lives, from the repository's root. */
export const SCHEMA_DUMP_PATH = 'libs/db/schema.sql';

const SERVER_URL = process.env.TEST_DATABASE_SERVER_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

/**
 * The schema today's migrations make, as `pg_dump --schema-only` prints it: tables, indexes,
 * functions and triggers in one file a reviewer can read (libs/db/schema.sql). The database is
 * migrated from empty here, not cloned from the tests' template, which is named after the
 * migrations' names and would not see a change inside one. `PG_DUMP` names another pg_dump
 * (its major version must be the server's or newer).
 */
export async function dumpMigratedSchema(serverUrl = SERVER_URL): Promise<string> {
  const name = `tes_schema_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: maintenanceUrl(serverUrl) });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE "${name}"`);
    const url = new URL(serverUrl);
    url.pathname = `/${name}`;
    const db = createDb({ url: url.toString(), poolMax: 1 });
    try {
      await migrateLatest(db);
    } finally {
      await db.destroy();
    }
    const { stdout } = await promisify(execFile)(
      process.env.PG_DUMP ?? 'pg_dump',
      ['--schema-only', '--no-owner', '--no-privileges', '--exclude-table=knex_migrations*', url.toString()],
      { maxBuffer: 64 * 1024 * 1024 },
    );
    return normalizeDump(stdout);
  } finally {
    await admin.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
    await admin.end();
  }
}

/**
 * The same schema gives the same text: without the lines that name pg_dump's and the server's
 * versions, or the random key of `\restrict` (pg_dump 15.14 and later), and with runs of blank
 * lines made one.
 */
function normalizeDump(text: string): string {
  return (
    text
      .split('\n')
      .filter((line) => !/^-- Dumped (from|by) /.test(line) && !/^\\(un)?restrict /.test(line))
      .join('\n')
      .replace(/\n{3,}/g, '\n\n')
      .trim() + '\n'
  );
}
