import { availableParallelism } from 'node:os';

/**
 * Run settings. Every load loop is bounded by these durations (and the drain limits), so a
 * run always ends by itself: `--quick` in about 4 minutes, the full run in about 10 (under 20).
 */
export interface BenchOptions {
  quick: boolean;
  /** Seconds of load before each measured run (JIT, pools, caches), not counted. */
  warmupSec: number;
  /** Seconds of each measured HTTP run and of each pgbench / pg-boss run. */
  durationSec: number;
  /** autocannon connections for B1–B4 and their baselines. */
  connections: number;
  /** Projects (each with one key) that the spread benchmarks rotate over. */
  projects: number;
  /** Keys on the one hot project of B4 (the per-key limiter row must not be the hot row). */
  hotKeys: number;
  /**
   * B5: worker concurrency for the test category, and the same number of submitting
   * connections, pg-boss senders and pg-boss workers ("the same concurrency").
   */
  concurrency: number;
  /**
   * GATEWAY_PROCESSES for the gateway under test. Default 1: on this 2-core machine two
   * processes measured slower (B1 4,171 vs 5,820 req/s in one session): the load generator and
   * Postgres need the second core, and with every core busy each request costs more CPU.
   */
  gatewayProcesses: number;
  /** DB_POOL_MAX of each gateway process: DB_CONNECTIONS split over its processes. */
  gatewayPoolMax: number;
  /** pgbench clients: the gateway's database connections in all, so both get the same parallelism. */
  pgbenchClients: number;
  /** Longest wait for queued executions / jobs to finish after a B5 phase. */
  drainLimitSec: number;
  /** B7: runs of each way to learn a result (polling, Prefer: wait, the event stream). */
  pushRuns: number;
  /** B8: event streams held open on one gateway (idle executions, one stream each). */
  streams: number;
  /**
   * B8/B9: seconds of each measured push run; at least 16, so that one 15 s re-read of every
   * watched execution by the gateway's ChangeHub always falls inside B8's.
   */
  pushSec: number;
  /** Run gateway, worker and relay with --cpu-prof (profiles kept in the run's log folder). */
  cpuProf: boolean;
  /**
   * --taskset=STACK/GATEWAY (CPU lists as taskset -c takes them, e.g. 0/1): the gateway's
   * processes and the servers it is compared with (hello worlds, the floor) run on GATEWAY;
   * PostgreSQL, RabbitMQ (every process of both, for the run), the harness (its S3), relay,
   * worker, the load generators and pgbench on STACK. So rows with 1, 2, 4 gateway processes
   * are comparable: the gateway's cores are its own. Unset: no pinning.
   */
  taskset: { stack: string; gateway: string } | undefined;
  /** Which benchmarks to run (all by default): --only=b1,b3 for development. */
  only: Set<string>;
  /**
   * --history=N: B1, B3 and B5 (with every service's peak RSS) on an empty database, then the
   * same runs on one holding N executions of history (history-bench.ts); 0: the usual run.
   */
  history: number;
  /** --history-db=NAME: the seeded history is kept in database NAME and reused by later runs. */
  historyDb: string | undefined;
  /** --seed-only (with --history-db): seed the kept database, catch its audit up, and stop. */
  seedOnly: boolean;
  /** --history-first: the history phase runs before the empty one (an order effect shows as a ratio that moves with the order). */
  historyFirst: boolean;
  /**
   * --rounds=N (with --history): the empty and history phases N times each, interleaved with the
   * order alternating (empty first, then history first, ...; --history-first starts the other
   * way); each figure is the median of its rounds. One run's ratio on this 2-core machine moves
   * ±15 % between runs of the same code, so a verdict wants several, interleaved.
   */
  rounds: number;
}

/** Database connections of the gateway in all (split over its processes) and pgbench's clients. */
const DB_CONNECTIONS = 10;
export const RATE_LIMIT_PER_MINUTE = 10_000_000;

const HELP = `npm run bench [-- --quick] [--only=b1,b2,b3,b4,b5,b7,b8,b9] [--connections=N] [--concurrency=N]
                [--duration=S] [--projects=N] [--gateway-processes=N]
                [--db-connections=N] [--streams=N] [--push-runs=N] [--cpu-prof]
                [--taskset=STACK_CPUS/GATEWAY_CPUS]   e.g. --taskset=0/1
                [--history=N]   B1, B3, B5 and peak RSS on an empty database, then with N executions of history
                [--history-db=NAME] keep the seeded history in database NAME and reuse it next time
                [--seed-only]   with --history-db: seed (and audit) the history, measure nothing
                [--history-first] run the history phase before the empty one (to see an order effect)
                [--rounds=N]    with --history: both phases N times, interleaved in alternating order; medians

Starts the service in production mode from dist/ on a database, queue prefix and S3 of its
own, measures B1-B9 (B6 comes with B5) next to baselines run in the same process tree on this
machine, prints a table and ends with one JSON line of named figures. See scripts/bench/README.md.`;

export function parseOptions(argv: string[]): BenchOptions {
  const flags = new Map<string, string>();
  for (const arg of argv) {
    if (arg === '--help' || arg === '-h') {
      process.stdout.write(`${HELP}\n`);
      process.exit(0);
    }
    const m = /^--([a-z-]+)(?:=(.*))?$/.exec(arg);
    if (!m) throw new Error(`unknown argument "${arg}" (try --help)`);
    flags.set(m[1]!, m[2] ?? 'true');
  }
  const known = [
    'quick',
    'only',
    'connections',
    'concurrency',
    'duration',
    'projects',
    'gateway-processes',
    'db-connections',
    'streams',
    'push-runs',
    'cpu-prof',
    'taskset',
    'history',
    'history-db',
    'seed-only',
    'history-first',
    'rounds',
  ];
  for (const k of flags.keys()) if (!known.includes(k)) throw new Error(`unknown flag --${k} (try --help)`);
  const quick = flags.get('quick') === 'true';
  const int = (name: string, fallback: number, min: number, max: number): number => {
    const raw = flags.get(name);
    if (raw === undefined) return fallback;
    const n = Number(raw);
    if (!Number.isInteger(n) || n < min || n > max) throw new Error(`--${name} must be a whole number from ${min} to ${max}`);
    return n;
  };
  const history = int('history', 0, 0, 100_000_000);
  const all = history ? ['b1', 'b3', 'b5'] : ['b1', 'b2', 'b3', 'b4', 'b5', 'b7', 'b8', 'b9'];
  const only = new Set((flags.get('only') ?? all.join(',')).split(',').map((s) => s.trim().toLowerCase()));
  for (const o of only) if (!all.includes(o)) throw new Error(`--only takes ${all.join(',')}${history ? ' with --history' : ''}; got "${o}"`);
  const historyDb = flags.get('history-db');
  const seedOnly = flags.get('seed-only') === 'true';
  const historyFirst = flags.get('history-first') === 'true';
  if (historyFirst && !history) throw new Error('--history-first goes with --history=N');
  const rounds = int('rounds', 1, 1, 20);
  if (rounds > 1 && flags.get('history-db') === undefined)
    throw new Error('--rounds goes with --history=N and --history-db=NAME (each round reuses the kept history)');
  if ((historyDb !== undefined || seedOnly) && !history) throw new Error('--history-db and --seed-only go with --history=N');
  if (seedOnly && historyDb === undefined) throw new Error('--seed-only needs --history-db=NAME (else the seed is dropped)');
  const gatewayProcesses = int('gateway-processes', 1, 1, Math.max(16, availableParallelism()));
  const connections = int('db-connections', DB_CONNECTIONS, 1, 200);
  const durationSec = int('duration', quick ? 4 : 15, 1, 120);
  const ts = flags.get('taskset');
  const tsMatch = ts === undefined ? null : /^([\d,-]+)\/([\d,-]+)$/.exec(ts);
  if (ts !== undefined && !tsMatch) throw new Error('--taskset takes STACK_CPUS/GATEWAY_CPUS as taskset -c lists them, e.g. 0/1 or 0-1/2-5');
  return {
    quick,
    warmupSec: quick ? 1 : 3,
    durationSec,
    connections: int('connections', 32, 1, 512),
    projects: int('projects', quick ? 100 : 400, 1, 10_000),
    hotKeys: 32,
    concurrency: int('concurrency', 8, 1, 256),
    gatewayProcesses,
    gatewayPoolMax: Math.max(1, Math.ceil(connections / gatewayProcesses)),
    pgbenchClients: Math.max(1, Math.ceil(connections / gatewayProcesses)) * gatewayProcesses,
    drainLimitSec: quick ? 15 : 60,
    pushRuns: int('push-runs', quick ? 5 : 20, 1, 200),
    streams: int('streams', quick ? 500 : 2000, 1, 10_000),
    pushSec: Math.max(16, durationSec),
    cpuProf: flags.get('cpu-prof') === 'true',
    taskset: tsMatch ? { stack: tsMatch[1]!, gateway: tsMatch[2]! } : undefined,
    only,
    history,
    historyDb,
    seedOnly,
    historyFirst,
    rounds,
  };
}
