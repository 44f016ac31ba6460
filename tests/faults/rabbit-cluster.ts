import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { freePort, sleep } from './cluster';
import { must, run, type Ran } from './private-infra';

/**
 * A RabbitMQ cluster of three nodes on this one machine: three Erlang VMs of the installed
 * server (Debian's rabbitmq-server 3.10), each with its own name, AMQP and distribution ports
 * (random, loopback), config, data and log folders under one temp folder, and one Erlang
 * cookie (the folder is every node's HOME, and rabbitmqctl's). The second and third node join
 * the first with `rabbitmqctl join_cluster`. A node can be SIGKILLed (a crash), stopped
 * (`rabbitmqctl stop`: the whole VM, cleanly) and started again; it rejoins by itself.
 *
 * Hazard: never the machine's default node (5672, `rabbit@<host>`): every command here names
 * one of this cluster's nodes (`rabbitmqctl -n`), and destroy() stops them all (SIGKILL as a
 * last resort) and removes the folder, on failure too. The nodes are detached daemons: a test
 * process killed outright leaves them running (stop them by their pid files,
 * node.pid in each node folder under /tmp/tes-faults-rmqc-…; see tests/faults/README.md).
 */
const BIN = '/usr/lib/rabbitmq/bin';
/** rabbitmqctl boots an Erlang VM per call (≈1 s of CPU): bounded, for a machine under load. */
const CTL_TIMEOUT_MS = 120_000;

export class RabbitNode {
  /** The VM's OS pid while it runs (read from its pid file). */
  private pid: number | undefined;
  running = false;

  constructor(
    /** a, b, c: the node's place in AMQP_URL. */
    readonly label: string,
    readonly name: string,
    readonly port: number,
    private readonly distPort: number,
    private readonly home: string,
    readonly dir: string,
  ) {}

  get url(): string {
    return `amqp://guest:guest@127.0.0.1:${this.port}`;
  }

  private get pidFile(): string {
    return path.join(this.dir, 'node.pid');
  }

  get env(): NodeJS.ProcessEnv {
    const d = this.dir;
    return {
      PATH: process.env.PATH,
      HOME: this.home, // the cluster's one Erlang cookie
      RABBITMQ_NODENAME: this.name,
      RABBITMQ_NODE_PORT: String(this.port),
      RABBITMQ_DIST_PORT: String(this.distPort),
      RABBITMQ_CONFIG_FILE: path.join(d, 'rabbitmq.conf'),
      RABBITMQ_CONF_ENV_FILE: path.join(d, 'rabbitmq-env.conf'),
      RABBITMQ_ENABLED_PLUGINS_FILE: path.join(d, 'enabled_plugins'),
      RABBITMQ_MNESIA_BASE: path.join(d, 'mnesia'),
      RABBITMQ_LOG_BASE: path.join(d, 'log'),
      RABBITMQ_PID_FILE: this.pidFile,
      ERL_FLAGS: '-kernel inet_dist_use_interface {127,0,0,1}',
    };
  }

  async prepare(): Promise<void> {
    await mkdir(path.join(this.dir, 'log'), { recursive: true });
    // the management plugin stays off (no HTTP port); AMQP on loopback only
    await writeFile(path.join(this.dir, 'rabbitmq.conf'), `listeners.tcp.local = 127.0.0.1:${this.port}\n`);
    await writeFile(path.join(this.dir, 'rabbitmq-env.conf'), '');
    await writeFile(path.join(this.dir, 'enabled_plugins'), '[].\n');
  }

  ctl(args: string[], timeoutMs = CTL_TIMEOUT_MS): Promise<Ran> {
    return run(path.join(BIN, 'rabbitmqctl'), ['-n', this.name, ...args], { env: this.env, cwd: this.home, timeoutMs });
  }

  /** Starts the VM detached and waits until the broker runs (≈6 s idle, much longer on a busy machine). */
  async start(): Promise<void> {
    // a killed VM leaves its pid file: `rabbitmqctl wait` would watch the dead pid
    await rm(this.pidFile, { force: true });
    const started = await run(path.join(BIN, 'rabbitmq-server'), ['-detached'], { env: this.env, cwd: this.home, quiet: true, timeoutMs: CTL_TIMEOUT_MS });
    if (started.code !== 0) throw new Error(`rabbitmq-server -detached (${this.name}) exited ${started.code}${await this.logTail()}`);
    this.running = true;
    const waited = await this.ctl(['wait', '--timeout', '150', this.pidFile], 170_000);
    if (waited.code !== 0) throw new Error(`${this.name} did not start (exit ${waited.code}):\n${waited.output.slice(-1_000)}${await this.logTail()}`);
    this.pid = Number((await readFile(this.pidFile, 'utf8')).trim());
  }

  /** A crash: SIGKILL to the Erlang VM, then waits until the process is gone. */
  async kill(): Promise<void> {
    const pid = this.pid ?? Number((await readFile(this.pidFile, 'utf8')).trim());
    process.kill(pid, 'SIGKILL');
    const deadline = Date.now() + 30_000;
    while (alive(pid)) {
      if (Date.now() > deadline) throw new Error(`${this.name} (pid ${pid}) still alive 30 s after SIGKILL`);
      await sleep(50);
    }
    this.pid = undefined;
    this.running = false;
  }

  /** A clean stop of the whole VM (`rabbitmqctl stop <pidfile>` returns once the process is gone). */
  async stop(): Promise<void> {
    await must(`rabbitmqctl stop (${this.name})`, this.ctl(['stop', this.pidFile]));
    this.pid = undefined;
    this.running = false;
  }

  /** Stops the node whatever its state: a clean stop, else SIGKILL. Never throws. */
  async halt(): Promise<void> {
    if (!this.running) return;
    const stopped = await this.ctl(['stop', this.pidFile], 60_000).catch(() => undefined);
    if (stopped?.code !== 0) {
      const pid = this.pid ?? (await readFile(this.pidFile, 'utf8').then(Number, () => undefined));
      if (pid && alive(pid)) process.kill(pid, 'SIGKILL');
    }
    this.running = false;
  }

  /** The last lines of the node's log, for an error message. */
  async logTail(): Promise<string> {
    const log = path.join(this.dir, 'log', `${this.name}.log`);
    if (!existsSync(log)) return `\n(no log at ${log})`;
    const text = await readFile(log, 'utf8');
    return `\n--- ${log} (last lines) ---\n${text.split('\n').slice(-25).join('\n')}`;
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** What `list_queues name members online --formatter json` says about one queue. */
export interface QueueReplicas {
  name: string;
  members: string[];
  online: string[];
}

export class RabbitCluster {
  private constructor(
    private readonly home: string,
    readonly nodes: RabbitNode[],
  ) {}

  /** AMQP_URL for the services: every node, comma-separated, in order. */
  get url(): string {
    return this.nodes.map((n) => n.url).join(',');
  }

  /** The node listening on a port (to read the services' `amqp.connection.ready` lines). */
  nodeByPort(port: number): RabbitNode | undefined {
    return this.nodes.find((n) => n.port === port);
  }

  static async start(size = 3): Promise<RabbitCluster> {
    if (!existsSync(path.join(BIN, 'rabbitmq-server'))) throw new Error('RabbitMQ is not installed (apt-get install rabbitmq-server)');
    const home = await mkdtemp(path.join(os.tmpdir(), 'tes-faults-rmqc-'));
    const id = randomBytes(3).toString('hex');
    const nodes: RabbitNode[] = [];
    for (let i = 0; i < size; i++) {
      const letter = String.fromCharCode(97 + i);
      nodes.push(new RabbitNode(letter, `tesclu${id}${letter}@localhost`, await freePort(), await freePort(), home, path.join(home, letter)));
    }
    const cluster = new RabbitCluster(home, nodes);
    try {
      await writeFile(path.join(home, '.erlang.cookie'), randomBytes(16).toString('hex').toUpperCase(), { mode: 0o400 });
      for (const n of nodes) await n.prepare();
      // the VMs boot side by side; the joins go one at a time
      await Promise.all(nodes.map((n) => n.start()));
      const [first, ...others] = nodes as [RabbitNode, ...RabbitNode[]];
      for (const n of others) {
        await must(`stop_app (${n.name})`, n.ctl(['stop_app']));
        await must(`join_cluster (${n.name} → ${first.name})`, n.ctl(['join_cluster', first.name]));
        await must(`start_app (${n.name})`, n.ctl(['start_app']));
      }
      await cluster.waitHealthy(120_000);
    } catch (err) {
      await cluster.destroy();
      throw err;
    }
    return cluster;
  }

  /** A running node to ask (the first that runs). */
  private any(): RabbitNode {
    const n = this.nodes.find((x) => x.running);
    if (!n) throw new Error('no node of the cluster is running');
    return n;
  }

  /** Running nodes as the cluster sees them (`cluster_status`). */
  async runningNodes(): Promise<string[]> {
    const out = await must('cluster_status', this.any().ctl(['cluster_status', '--formatter', 'json']));
    return (JSON.parse(out) as { running_nodes: string[] }).running_nodes;
  }

  /** Quorum queues whose name starts with `prefix`, with their members and the members online. */
  async quorumQueues(prefix: string): Promise<QueueReplicas[]> {
    const out = await must('list_queues', this.any().ctl(['list_queues', 'name', 'type', 'members', 'online', '--formatter', 'json']));
    const rows = JSON.parse(out) as { name: string; type: string; members: string[] | ''; online: string[] | '' }[];
    return rows
      .filter((r) => r.name.startsWith(prefix) && r.type === 'quorum')
      .map((r) => ({ name: r.name, members: r.members || [], online: r.online || [] }));
  }

  /**
   * Polls until every node runs in the cluster and, with `queuePrefix`, every quorum queue of
   * that prefix has all nodes as members and all of them online (its replica caught up and
   * voting again). Returns how long it took.
   */
  async waitHealthy(timeoutMs: number, queuePrefix?: string): Promise<number> {
    const started = Date.now();
    let last: string;
    for (;;) {
      try {
        const running = await this.runningNodes();
        const missing = this.nodes.filter((n) => !running.includes(n.name)).map((n) => n.name);
        if (missing.length > 0) last = `not running: ${missing.join(', ')}`;
        else if (queuePrefix === undefined) return Date.now() - started;
        else {
          const queues = await this.quorumQueues(queuePrefix);
          const lagging = queues.filter((q) => q.members.length !== this.nodes.length || q.online.length !== this.nodes.length);
          if (queues.length > 0 && lagging.length === 0) return Date.now() - started;
          last = queues.length === 0 ? 'no quorum queue yet' : `replicas not all online: ${JSON.stringify(lagging.slice(0, 3))}`;
        }
      } catch (err) {
        last = (err as Error).message.slice(0, 500);
      }
      if (Date.now() - started > timeoutMs) throw new Error(`cluster not healthy after ${timeoutMs} ms: ${last}`);
      await sleep(500);
    }
  }

  /** Stops every node (cleanly, else SIGKILL) and removes the folder. Never throws. */
  async destroy(): Promise<void> {
    await Promise.all(this.nodes.map((n) => n.halt()));
    await rm(this.home, { recursive: true, force: true }).catch(() => undefined);
  }
}
