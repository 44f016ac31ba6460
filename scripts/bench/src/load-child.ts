/**
 * The HTTP load generator: autocannon's programmatic API in a process of its own (so its
 * CPU is not the harness's, and the harness's embedded S3 is not slowed by it). Reads a
 * LoadSpec from BENCH_LOAD_SPEC, runs a warmup and then the measured run, prints one JSON
 * line (LoadResult) on stdout. Targets only 127.0.0.1; bounded by duration.
 */
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { LoadResult, LoadSpec } from './http-load';
import { OutstandingGate } from './window';

// autocannon ships no types; only what is used here is declared.
interface AutocannonRequest {
  method?: string;
  path?: string;
  headers?: Record<string, string>;
  body?: string;
}
interface AutocannonResult {
  duration: number;
  errors: number;
  timeouts: number;
  non2xx: number;
  requests: { total: number; average: number };
  latency: { p50: number; p90: number; p99: number; max: number; average: number };
  statusCodeStats?: Record<string, { count: number }>;
}
const autocannon = require('autocannon') as (opts: Record<string, unknown>) => Promise<AutocannonResult>;

const spec = JSON.parse(process.env.BENCH_LOAD_SPEC ?? 'null') as LoadSpec | null;
if (!spec) throw new Error('BENCH_LOAD_SPEC is required');
const url = new URL(spec.url);
if (url.hostname !== '127.0.0.1') throw new Error(`load targets 127.0.0.1 only, got ${url.hostname}`);

const MAX_PER_SEC = 100_000;
// Backstop: whatever happens, this process ends shortly after its planned run.
setTimeout(() => process.exit(3), (spec.warmupSec + spec.durationSec + 30) * 1000).unref();

// Unique across processes and runs: a random prefix and a counter.
const runId = randomBytes(6).toString('hex');
let counter = 0;

function buildRequest(req: AutocannonRequest): AutocannonRequest {
  const target = spec!.targets[counter % spec!.targets.length]!;
  counter += 1;
  const headers: Record<string, string> = { ...spec!.headers, authorization: `Bearer ${target.secret}` };
  if (spec!.idempotent) headers['idempotency-key'] = `bench-${runId}-${counter}`;
  if (spec!.body !== undefined) headers['content-type'] = 'application/json';
  return { ...req, method: spec!.method, path: target.path, headers, body: spec!.body };
}

let gate: OutstandingGate | undefined;

async function once(durationSec: number, overallRate?: number): Promise<AutocannonResult> {
  if (overallRate) return paced(durationSec, overallRate);
  if (spec!.window) {
    if (!gate) {
      gate = new OutstandingGate(spec!.window.databaseUrl, spec!.window.finishedSql, spec!.window.params, spec!.window.limit);
      await gate.start();
    }
    return windowed(durationSec, gate);
  }
  return autocannon({
    url: spec!.url,
    connections: spec!.connections,
    duration: durationSec,
    pipelining: 1,
    timeout: 10,
    // bounded in count as well as time: far above what this machine can answer, so it
    // never ends a run early, but a runaway loop stops
    maxOverallRequests: durationSec * MAX_PER_SEC,
    requests: [{ setupRequest: buildRequest }],
  });
}

/** One request on the keep-alive `agent`; resolves with its status, or 0 on a socket error or timeout. */
function sendOne(agent: http.Agent, req: AutocannonRequest, counters: { errors: number; timeouts: number }): Promise<number> {
  return new Promise<number>((resolve) => {
    const r = http.request(
      {
        agent,
        host: url.hostname,
        port: url.port,
        method: req.method,
        path: req.path,
        headers: { ...req.headers, ...(req.body ? { 'content-length': String(Buffer.byteLength(req.body)) } : {}) },
        timeout: 10_000,
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      },
    );
    r.on('timeout', () => {
      counters.timeouts += 1;
      r.destroy(new Error('timeout'));
    });
    r.on('error', () => {
      counters.errors += 1;
      resolve(0);
    });
    r.end(req.body);
  });
}

/** Collects answers and renders them in autocannon's result shape. */
class Tally {
  readonly latencies: number[] = [];
  readonly statusCodeStats: Record<string, { count: number }> = {};
  readonly counters = { errors: 0, timeouts: 0 };
  private readonly start = performance.now();

  add(status: number, since: number): void {
    if (status === 0) return;
    this.latencies.push(performance.now() - since);
    (this.statusCodeStats[String(status)] ??= { count: 0 }).count += 1;
  }

  result(): AutocannonResult {
    const duration = (performance.now() - this.start) / 1000;
    const l = [...this.latencies].sort((a, b) => a - b);
    const at = (q: number) => (l.length ? l[Math.min(l.length - 1, Math.floor(q * l.length))]! : 0);
    const ok = Object.entries(this.statusCodeStats)
      .filter(([c]) => c.startsWith('2'))
      .reduce((a, [, s]) => a + s.count, 0);
    return {
      duration,
      errors: this.counters.errors,
      timeouts: this.counters.timeouts,
      non2xx: l.length - ok,
      requests: { total: l.length + this.counters.errors, average: l.length / duration },
      latency: { p50: at(0.5), p90: at(0.9), p99: at(0.99), max: at(1), average: l.reduce((a, b) => a + b, 0) / Math.max(1, l.length) },
      statusCodeStats: this.statusCodeStats,
    };
  }
}

/**
 * Open loop at `rate` requests/s, evenly spaced: request i leaves at start + i/rate whether
 * or not earlier ones were answered (keep-alive sockets, at most `connections` + what a
 * backlog needs). Latency is measured from the scheduled send time, so a stalled server
 * is charged for the wait it causes (no coordinated omission).
 */
async function paced(durationSec: number, rate: number): Promise<AutocannonResult> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: Math.max(spec!.connections, 64) });
  const total = Math.min(Math.round(durationSec * rate), durationSec * MAX_PER_SEC);
  const intervalMs = 1000 / rate;
  const tally = new Tally();
  const start = performance.now();
  const inFlight: Promise<void>[] = [];
  for (let i = 0; i < total; i++) {
    const due = start + i * intervalMs;
    const wait = due - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    inFlight.push(sendOne(agent, buildRequest({}), tally.counters).then((status) => tally.add(status, due)));
  }
  await Promise.all(inFlight);
  agent.destroy();
  return tally.result();
}

/**
 * Closed loop with a window: `connections` loops send as fast as they are answered, but
 * only while fewer than `window.limit` accepted executions are unfinished (OutstandingGate).
 */
async function windowed(durationSec: number, gate: OutstandingGate): Promise<AutocannonResult> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: spec!.connections });
  const tally = new Tally();
  const until = Date.now() + durationSec * 1000;
  let count = 0;
  await Promise.all(
    Array.from({ length: spec!.connections }, async () => {
      while (Date.now() < until && count < durationSec * MAX_PER_SEC) {
        await gate.take();
        if (Date.now() >= until) {
          gate.giveBack();
          break;
        }
        count += 1;
        const since = performance.now();
        const status = await sendOne(agent, buildRequest({}), tally.counters);
        if (status !== 202) gate.giveBack();
        tally.add(status, since);
      }
    }),
  );
  agent.destroy();
  return tally.result();
}

async function main(): Promise<void> {
  if (spec!.warmupSec > 0) await once(spec!.warmupSec, spec!.overallRate);
  const r = await once(spec!.durationSec, spec!.overallRate);
  const byStatus: Record<string, number> = {};
  for (const [code, s] of Object.entries(r.statusCodeStats ?? {})) byStatus[code] = s.count;
  const ok = Object.entries(byStatus)
    .filter(([code]) => code.startsWith('2'))
    .reduce((a, [, n]) => a + n, 0);
  const result: LoadResult = {
    durationSec: r.duration,
    total: r.requests.total,
    okPerSec: ok / r.duration,
    byStatus,
    errors: r.errors,
    timeouts: r.timeouts,
    latencyMs: { p50: r.latency.p50, p90: r.latency.p90, p99: r.latency.p99, max: r.latency.max, mean: r.latency.average },
  };
  await gate?.stop();
  process.stdout.write(`${JSON.stringify(result)}\n`);
}

process.once('SIGTERM', () => process.exit(143));
main().catch((err: unknown) => {
  process.stderr.write(`load: ${(err as Error).stack}\n`);
  process.exit(1);
});
