/**
 * `node scripts/bench/dist/ab-gateway.js --before=DIR [--rounds=N] [--seconds=S] [--only=poll,submit]`
 * (after `npm run bench`, or `tsc -b && tsc -b scripts/bench`): the gateway's CPU per request,
 * this checkout's build ("after") against another checkout's ("before", DIR: a repository root
 * whose services/gateway/dist is built, e.g. a `git worktree` of the base commit after its own
 * `npm ci && npx tsc -b`). Both gateways run at once on one database, queue prefix and bucket
 * (the bench's ServiceStack), as production runs them (NODE_ENV=production, LOG_LEVEL=info, the
 * manifest's heap cap). Each round loads both with the same request stream, interleaved
 * A B, B A, … so that a busy machine slows both sides alike, and reads each gateway process's
 * CPU (utime + stime, all its threads) from /proc around its load. Prints one line per round and
 * one JSON line: CPU ms per request of each, and the median and quartiles of after ÷ before.
 *
 * Throughput on a 2-core machine moves ±30 % from run to run; CPU per request on the gateway's
 * own process, interleaved, moves a few %: this is how a gateway change is measured.
 */
import { mkdtempSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { getExecutionSpec, submitSpec } from './bench-http';
import { runLoad, type LoadSpec } from './http-load';
import { cpuMsOf } from './meter';
import { pinServers, unpinServers } from './pin';
import { cleanUpOnSignal, killAllNow, setPinning, stopAll } from './procs';
import { seedSpread, submitBody, submitOneEach } from './seed';
import { ServiceStack } from './stack';
import { interpolatedQuantile, median } from './stats';

/** Read and write system calls of a process so far (all its threads), from /proc/PID/io. */
function syscalls(pid: number): { reads: number; writes: number } {
  const io = readFileSync(`/proc/${pid}/io`, 'utf8');
  const field = (name: string) => Number(new RegExp(`^${name}: (\\d+)$`, 'm').exec(io)?.[1] ?? NaN);
  return { reads: field('syscr'), writes: field('syscw') };
}

const fmtIo = (x: { reads: number; writes: number } | undefined): string => (x ? `${x.reads.toFixed(2)}/${x.writes.toFixed(2)}` : '?');

const round3 = (x: number): number => Math.round(x * 1000) / 1000;

interface AbOptions {
  before: string;
  rounds: number;
  seconds: number;
  only: string[];
  connections: number;
  /** --rate=N: requests per second, evenly spaced (open loop); unset: as fast as answered over the connections. */
  rate?: number;
  /** --taskset=STACK/GATEWAY: PostgreSQL, RabbitMQ, the harness and the load on STACK, both gateways on GATEWAY. */
  taskset?: { stack: string; gateway: string };
  /** Extra environment of each side's gateway (--env-before=K=V, --env-after=K=V; repeatable). */
  env: { before: Record<string, string>; after: Record<string, string> };
}

const KNOWN_FLAGS = new Set(['before', 'rounds', 'seconds', 'only', 'connections', 'taskset', 'rate', 'help']);

function tasksetOf(value: string | undefined): AbOptions['taskset'] {
  if (value === undefined) return undefined;
  const m = /^([\d,-]+)\/([\d,-]+)$/.exec(value);
  if (!m) throw new Error(`--taskset takes STACK/GATEWAY CPU lists (e.g. 0/1), not ${value}`);
  return { stack: m[1]!, gateway: m[2]! };
}

function parseArgs(argv: string[]): AbOptions {
  const env: AbOptions['env'] = { before: {}, after: {} };
  const flags = new Map<string, string | undefined>();
  let bad: string | undefined;
  for (const a of argv) {
    const m = /^--env-(before|after)=([A-Za-z_][A-Za-z0-9_]*)=(.*)$/.exec(a);
    if (m) {
      env[m[1] as 'before' | 'after'][m[2]!] = m[3]!;
      continue;
    }
    // split at the first '=' only: a value (a path) may hold one
    const f = /^--([a-z-]+)(?:=(.*))?$/.exec(a);
    if (f && KNOWN_FLAGS.has(f[1]!)) flags.set(f[1]!, f[2]);
    else bad ??= a;
  }
  if (bad !== undefined) process.stderr.write(`ab-gateway: unknown or malformed argument: ${bad}\n`);
  if (bad !== undefined || flags.has('help') || !flags.get('before')) {
    process.stderr.write(
      'usage: node scripts/bench/dist/ab-gateway.js --before=DIR [--rounds=8] [--seconds=4] [--only=poll,submit] [--connections=32]\n' +
        '                                            [--env-before=K=V] [--env-after=K=V] [--taskset=0/1] [--rate=N]\n' +
        '  DIR: a repository root with services/gateway/dist built (the "before" build); this checkout is "after"\n' +
        "  --env-*: extra environment for that side's gateway (repeatable), e.g. --before=. --env-after=LOG_LEVEL=warn\n" +
        '           prices the access log on one build\n' +
        '  --taskset: the gateways alone on the second CPU list, everything else on the first (less noise)\n' +
        "  --rate: N requests a second, evenly spaced, below both builds' capacity: the same work per event-loop turn on both sides\n",
    );
    process.exit(flags.has('help') && bad === undefined ? 0 : 2);
  }
  return {
    before: path.resolve(flags.get('before')!),
    rounds: Number(flags.get('rounds') ?? 8),
    seconds: Number(flags.get('seconds') ?? 4),
    only: (flags.get('only') ?? 'poll,submit').split(','),
    connections: Number(flags.get('connections') ?? 32),
    taskset: tasksetOf(flags.get('taskset')),
    rate: flags.has('rate') ? Number(flags.get('rate')) : undefined,
    env,
  };
}

async function main(): Promise<void> {
  const o = parseArgs(process.argv.slice(2));
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED = 'true';
  const logDir = mkdtempSync(path.join(os.tmpdir(), 'tes-ab-gateway-'));
  const stack = new ServiceStack(logDir, { concurrency: 8, gatewayProcesses: 1, gatewayPoolMax: 10 });
  process.on('exit', killAllNow);
  const say = (line: string) => process.stderr.write(`ab-gateway: ${line}\n`);
  // one clean-up for every way out: the end, a failure, Ctrl-C or SIGTERM
  const cleanUp = async () => {
    if (o.taskset) unpinServers();
    await stopAll().catch(() => undefined);
    await stack.stop().catch((err: unknown) => say(`cleanup: ${(err as Error).message}`));
  };
  cleanUpOnSignal(say, cleanUp);
  try {
    if (o.taskset) {
      setPinning(o.taskset);
      const note = pinServers(o.taskset.stack);
      if (note) say(note);
    }
    say(`starting the stack and the before build (${o.before}); logs in ${logDir}`);
    await stack.start();
    const before = await stack.startGatewayFrom(o.before, 'gateway-before', o.env.before);
    // never the stack's own gateway, which seeded the run and started before the relay: both
    // sides are started the same way (with it as a side, null runs were off by −20 … +12 %)
    const after = await stack.startGatewayFrom(path.resolve(__dirname, '../../..'), 'gateway-after', o.env.after);
    const tenants = await seedSpread(stack.db, 100);
    const body = await submitBody(after.baseUrl, tenants[0]!.secret);
    await submitOneEach(after.baseUrl, tenants, body);
    const specs: Record<string, Omit<LoadSpec, 'url' | 'connections' | 'warmupSec' | 'durationSec'>> = {
      poll: getExecutionSpec(tenants),
      submit: submitSpec(tenants, body),
    };
    const summary: Record<string, unknown> = {};
    for (const what of o.only) {
      const spec = specs[what];
      if (!spec) throw new Error(`--only takes poll and submit, not ${what}`);
      const ratios: number[] = [];
      const per = { before: [] as number[], after: [] as number[] };
      const sides = { before, after };
      // both JIT-warm before the first measured round (the first seconds cost a gateway up to 40 % more)
      for (const side of ['before', 'after'] as const) {
        await runLoad(
          { ...spec, url: sides[side].baseUrl, connections: o.connections, warmupSec: 0, durationSec: 3 },
          { logDir, name: `${what}-${side}-warmup` },
        );
      }
      for (let r = 0; r < o.rounds; r++) {
        const order: ('before' | 'after')[] = r % 2 === 0 ? ['before', 'after'] : ['after', 'before'];
        const ms: Record<string, number> = {};
        const io: Record<string, { reads: number; writes: number }> = {};
        for (const side of order) {
          const { child, baseUrl } = sides[side];
          // a short warm-up of its own, then the measured load
          await runLoad(
            { ...spec, url: baseUrl, connections: o.connections, warmupSec: 0, durationSec: 1, overallRate: o.rate },
            { logDir, name: `${what}-${side}-warm` },
          );
          const c0 = cpuMsOf(child.pid);
          const s0 = syscalls(child.pid);
          const result = await runLoad(
            { ...spec, url: baseUrl, connections: o.connections, warmupSec: 0, durationSec: o.seconds, overallRate: o.rate },
            { logDir, name: `${what}-${side}` },
          );
          const answered = result.byStatus[what === 'poll' ? '200' : '202'] ?? 0;
          if (answered === 0 || answered < result.total * 0.99) throw new Error(`${what} ${side}: ${JSON.stringify(result.byStatus)}`);
          ms[side] = (cpuMsOf(child.pid) - c0) / answered;
          per[side].push(ms[side]);
          const s1 = syscalls(child.pid);
          io[side] = { reads: (s1.reads - s0.reads) / answered, writes: (s1.writes - s0.writes) / answered };
        }
        ratios.push(ms.after! / ms.before!);
        say(
          `${what} round ${r + 1}: before ${ms.before!.toFixed(3)} ms, after ${ms.after!.toFixed(3)} ms per request (× ${(ms.after! / ms.before!).toFixed(3)}); syscalls per request read/write: before ${fmtIo(io.before)}, after ${fmtIo(io.after)}`,
        );
      }
      const sorted = [...ratios].sort((a, b) => a - b);
      summary[what] = {
        beforeCpuMsPerRequest: round3(median(per.before)!),
        afterCpuMsPerRequest: round3(median(per.after)!),
        ratioMedian: round3(median(ratios)!),
        ratioQuartiles: [round3(interpolatedQuantile(sorted, 0.25)), round3(interpolatedQuantile(sorted, 0.75))],
        lowerIn: `${ratios.filter((x) => x < 1).length} of ${ratios.length}`,
      };
    }
    process.stdout.write(`${JSON.stringify(summary)}\n`);
  } finally {
    await cleanUp();
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`ab-gateway failed: ${(err as Error).stack ?? String(err)}\n`);
    process.exit(1);
  },
);
