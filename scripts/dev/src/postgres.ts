import { spawn } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import readline from 'node:readline';
import pg from 'pg';
import { DEFAULTS } from '@tes/config';
import { createDb, databaseName, ensureDatabase, maintenanceUrl, migrateLatest } from '@tes/db';
import type { Lifecycle } from './lifecycle';
import { DevError, line, redactUrl, say } from './output';
import type { HostMessage, HostOptions } from './pg-host';
import { freePort, sleep } from './ports';
import type { Settings } from './settings';

const HOST = path.join(__dirname, 'pg-host.js');
// Loopback-only development cluster: a fixed password is fine and lets a restart reuse it.
const EMBEDDED_USER = 'postgres';
const EMBEDDED_PASSWORD = 'tes-dev';
const START_TIMEOUT_MS = 60_000;
const STOP_DEADLINE_MS = 15_000;

/** Resolves to undefined when a Postgres answers at `url`, else to the reason it did not. */
async function probe(url: string): Promise<string | undefined> {
  const client = new pg.Client({ connectionString: maintenanceUrl(url), connectionTimeoutMillis: 3_000 });
  client.on('error', () => undefined);
  try {
    await client.connect();
    await client.query('SELECT 1');
    return undefined;
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    return e.code ? `${e.code}: ${e.message}` : e.message;
  } finally {
    await client.end().catch(() => undefined);
  }
}

/**
 * The database the services will use:
 * - DATABASE_URL when set (never second-guessed: if it is wrong, migrating says so);
 * - else the local Postgres at DEV_PG_PROBE_URL (default: the services' default URL) when
 *   one answers there;
 * - else an embedded Postgres, started here and stopped with the launcher.
 */
export async function resolveDatabaseUrl(settings: Settings, lifecycle: Lifecycle, onDied: (how: string) => void): Promise<string> {
  if (settings.explicitDatabaseUrl) return settings.explicitDatabaseUrl;
  const reason = await probe(settings.pgProbeUrl);
  if (reason === undefined) {
    say.info(`Postgres: using the local server at ${redactUrl(settings.pgProbeUrl)}`);
    return settings.pgProbeUrl;
  }
  say.info(`Postgres: none usable at ${redactUrl(settings.pgProbeUrl)} (${reason})`);
  say.info(`Postgres: starting an embedded one, data in ${settings.embeddedPgDir}`);
  return startEmbedded(settings, lifecycle, onDied);
}

async function startEmbedded(settings: Settings, lifecycle: Lifecycle, onDied: (how: string) => void): Promise<string> {
  mkdirSync(path.dirname(settings.embeddedPgDir), { recursive: true });
  const port = await freePort();
  const options: HostOptions = {
    dataDir: settings.embeddedPgDir,
    port,
    user: EMBEDDED_USER,
    password: EMBEDDED_PASSWORD,
    verbose: settings.config.logLevel === 'debug',
  };
  const host = spawn(process.execPath, [HOST], {
    env: { ...process.env, DEV_PG_HOST_OPTIONS: JSON.stringify(options) },
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    detached: true,
  });
  for (const [stream, to] of [
    [host.stdout, process.stdout],
    [host.stderr, process.stderr],
  ] as const) {
    if (stream) readline.createInterface({ input: stream, crlfDelay: Infinity }).on('line', (l) => line('postgres', l, to));
  }
  let ready = false;
  let exited = false;
  const exit = new Promise<string>((resolve) => {
    host.once('exit', (code, signal) => {
      exited = true;
      resolve(signal ? `signal ${signal}` : `code ${code}`);
    });
    // spawn itself failed: no 'exit' follows, and an unheard 'error' would crash the launcher
    host.on('error', (err) => {
      exited = true;
      resolve(`could not start: ${err.message}`);
    });
  });
  void exit.then((how) => {
    if (ready && !lifecycle.isStopping) onDied(how);
  });

  await lifecycle.add({
    name: 'embedded Postgres',
    stop: async () => {
      if (exited || host.pid === undefined) return;
      host.kill('SIGTERM');
      const outcome = await Promise.race([exit, sleep(STOP_DEADLINE_MS).then(() => 'deadline')]);
      if (outcome === 'deadline') {
        say.warn(`embedded Postgres did not stop within ${STOP_DEADLINE_MS / 1000} s: killing it (the next start clears its pid file)`);
        try {
          process.kill(-host.pid, 'SIGKILL');
        } catch {
          // already gone
        }
        await exit;
      }
    },
  });

  const outcome = await new Promise<HostMessage | { type: 'exited'; how: string } | { type: 'timeout' }>((resolve) => {
    host.on('message', (m: HostMessage) => resolve(m));
    void exit.then((how) => resolve({ type: 'exited', how }));
    setTimeout(() => resolve({ type: 'timeout' }), START_TIMEOUT_MS).unref();
  });
  if (outcome.type === 'failed') throw new DevError(`embedded Postgres failed to start: ${outcome.message}`);
  if (outcome.type === 'exited') throw new DevError(`embedded Postgres exited while starting (${outcome.how}); see its output above`);
  if (outcome.type === 'timeout') throw new DevError(`embedded Postgres was not ready after ${START_TIMEOUT_MS / 1000} s`);
  ready = true;
  const dbName = databaseName(DEFAULTS.DATABASE_URL);
  const url = `postgres://${EMBEDDED_USER}:${EMBEDDED_PASSWORD}@127.0.0.1:${port}/${dbName}`;
  say.info(`Postgres: embedded server ready on 127.0.0.1:${port}`);
  return url;
}

/** Creates the database when missing and applies pending migrations, in this process. */
export async function prepareDatabase(url: string): Promise<void> {
  let created: boolean;
  try {
    created = await ensureDatabase(url);
  } catch (err) {
    throw new DevError(
      `cannot use Postgres at ${redactUrl(url)}: ${(err as Error).message}\n` +
        '  Start Postgres, fix DATABASE_URL, or unset DATABASE_URL to let npm start find a local one or run an embedded one.',
    );
  }
  if (created) say.info(`Postgres: created database "${databaseName(url)}"`);
  const db = createDb({ url, poolMax: 1, applicationName: 'tes-dev' });
  try {
    const applied = await migrateLatest(db);
    say.info(applied.length > 0 ? `migrations: applied ${applied.join(', ')}` : 'migrations: up to date');
  } finally {
    await db.destroy();
  }
}
