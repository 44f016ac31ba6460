import knexFactory, { type Knex } from 'knex';
import pg from 'pg';
import { MIGRATIONS } from './migrations';

// bigint (int8) columns hold micros and counts far below 2^53: parse them as numbers.
// Amounts are still checked as safe integers where they enter the ledger.
pg.types.setTypeParser(pg.types.builtins.INT8, (v: string) => {
  const n = Number(v);
  if (!Number.isSafeInteger(n)) throw new Error(`int8 value out of the safe range: ${v}`);
  return n;
});

export type Db = Knex;

/** Bounds on waiting in Postgres, in ms; 0 (or absent): not set here (the server's own setting applies). */
export interface DbTimeouts {
  /** statement_timeout: a statement running longer is cancelled (57014 query_canceled). */
  statementTimeoutMs?: number;
  /** lock_timeout: a statement waiting longer for a lock fails (55P03 lock_not_available). */
  lockTimeoutMs?: number;
  /** idle_in_transaction_session_timeout: a session idle inside a transaction longer is ended (25P03), its locks released. */
  idleInTransactionTimeoutMs?: number;
}

export interface DbOptions {
  url: string;
  poolMax?: number;
  applicationName?: string;
  /** Set on every connection of the pool as it opens (startup parameters, no extra round trip). */
  timeouts?: DbTimeouts;
}

export function createDb(options: DbOptions): Db {
  const t = options.timeouts ?? {};
  return knexFactory({
    client: 'pg',
    connection: {
      connectionString: options.url,
      application_name: options.applicationName ?? 'tes',
      // node-postgres sends these as startup parameters; a 0 is left out
      ...(t.statementTimeoutMs ? { statement_timeout: t.statementTimeoutMs } : {}),
      ...(t.lockTimeoutMs ? { lock_timeout: t.lockTimeoutMs } : {}),
      ...(t.idleInTransactionTimeoutMs ? { idle_in_transaction_session_timeout: t.idleInTransactionTimeoutMs } : {}),
    },
    pool: { min: 0, max: options.poolMax ?? 10 },
    acquireConnectionTimeout: 10_000,
  });
}

/**
 * The pool's state for the metrics (collected on every scrape: `metrics.watchDbPool(() =>
 * poolStats(db))`). A destroyed pool, or one not made yet, counts as empty.
 */
export function poolStats(db: Db): { inUse: number; idle: number; pending: number; max: number } {
  const pool = (db.client as { pool?: { numUsed(): number; numFree(): number; numPendingAcquires(): number; max: number } }).pool;
  if (!pool) return { inUse: 0, idle: 0, pending: 0, max: 0 };
  return { inUse: pool.numUsed(), idle: pool.numFree(), pending: pool.numPendingAcquires(), max: pool.max };
}

const migrationSource: Knex.MigrationSource<string> = {
  getMigrations: async () => MIGRATIONS.map(([name]) => name),
  getMigrationName: (name) => name,
  getMigration: async (name) => {
    const found = MIGRATIONS.find(([n]) => n === name);
    if (!found) throw new Error(`unknown migration ${name}`);
    return found[1];
  },
};

export interface MigrateOptions {
  /** How long to wait for another migrate that is running now (default 15 min, the Job's wait). */
  waitMs?: number;
  /** Told when knex's lock was left set by a migrate that is gone, and was freed. */
  onStaleLock?: () => void;
  /** Told once, when another migrate is running and this one waits for it. */
  onWaiting?: () => void;
}

/** Held by the session of a running migrate, for its whole run (migrateLatest). */
const RUNNING_LOCK = `hashtext('tes.migrate.running')`;

/**
 * Applies every pending migration; returns the names applied.
 *
 * knex marks a run in a table (knex_migrations_lock.is_locked) and clears it at the end, so a
 * migrate killed midway (its Job's deadline, an OOM, a node lost) left the mark set and every
 * later run failed at once ("Migration table is already locked"), the Job's retries included.
 * The mark alone cannot tell a dead run from a live one; a session lock can: each run holds a
 * session-level advisory lock on a connection of its own for as long as it runs, and Postgres
 * releases it when that session ends, however the process died. So a run that gets the lock
 * knows no other run of this release is alive: a mark still set is stale, and it frees it. A run
 * that does not get it waits for the live one (at most `waitMs`), then finds nothing to apply.
 * (A migrate of a release before this one holds no such lock: do not run two releases'
 * migrations at once, which the deploy steps never do.)
 */
export async function migrateLatest(db: Db, options: MigrateOptions = {}): Promise<string[]> {
  // createDb's connection settings: a client of its own, outside the pool (which may hold one connection)
  const { connectionString, application_name } = (db.client as { config: { connection: { connectionString: string; application_name?: string } } }).config
    .connection;
  const holder = new pg.Client({ connectionString, application_name: `${application_name ?? 'tes'}-migrate` });
  await holder.connect();
  try {
    const deadline = Date.now() + (options.waitMs ?? 15 * 60_000);
    for (let told = false; ; told = true) {
      const got = await holder.query<{ ok: boolean }>(`SELECT pg_try_advisory_lock(${RUNNING_LOCK}) AS ok`);
      if (got.rows[0]?.ok) break;
      if (Date.now() > deadline) throw new Error('another migrate is still running (it holds the tes.migrate.running lock); try again when it has ended');
      if (!told) options.onWaiting?.();
      await new Promise((r) => setTimeout(r, 1000));
    }
    const mark = await holder.query<{ is_locked: number }>('SELECT is_locked FROM knex_migrations_lock').catch((err: unknown) => {
      if ((err as { code?: string }).code === '42P01') return { rows: [] }; // a new database: knex makes the table
      throw err;
    });
    if (mark.rows.some((r) => r.is_locked)) {
      await db.migrate.forceFreeMigrationsLock({ migrationSource });
      options.onStaleLock?.();
    }
    const [, applied] = (await db.migrate.latest({ migrationSource })) as [number, string[]];
    return applied;
  } finally {
    // ending the session releases the lock too; an explicit unlock first keeps it exact
    await holder.query(`SELECT pg_advisory_unlock(${RUNNING_LOCK})`).catch(() => undefined);
    await holder.end().catch(() => undefined);
  }
}

/** The name of the database in a postgres URL. */
export function databaseName(url: string): string {
  const name = decodeURIComponent(new URL(url).pathname.replace(/^\//, ''));
  if (!/^[A-Za-z0-9_-]{1,63}$/.test(name)) throw new Error(`unsupported database name "${name}"`);
  return name;
}

/** A URL for the same server's maintenance database, to create or drop others. */
export function maintenanceUrl(url: string): string {
  const u = new URL(url);
  u.pathname = '/postgres';
  return u.toString();
}

/** Creates the database named in `url` when it does not exist yet. */
export async function ensureDatabase(url: string): Promise<boolean> {
  const name = databaseName(url);
  const admin = new pg.Client({ connectionString: maintenanceUrl(url) });
  await admin.connect();
  try {
    const found = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (found.rowCount) return false;
    try {
      await admin.query(`CREATE DATABASE "${name}"`);
    } catch (err) {
      // another process created it between our check and our create
      if ((err as { code?: string }).code !== '42P04') throw err;
      return false;
    }
    return true;
  } finally {
    await admin.end();
  }
}

/** Readiness: the pool can run a statement. */
export async function pingDb(db: Db): Promise<boolean> {
  await db.raw('SELECT 1');
  return true;
}
