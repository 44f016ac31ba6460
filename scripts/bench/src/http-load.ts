import path from 'node:path';
import type { CpuMeter } from './meter';
import { startNode } from './procs';

/** What the load child sends: every request rotates over `targets` (key + path). */
export interface LoadSpec {
  url: string;
  method: 'GET' | 'POST';
  targets: { secret: string; path: string }[];
  headers: Record<string, string>;
  body?: string;
  /** A fresh Idempotency-Key on every request (submits). */
  idempotent: boolean;
  connections: number;
  warmupSec: number;
  durationSec: number;
  /**
   * Requests per second, evenly spaced (open loop: a request leaves on schedule whether or
   * not earlier ones were answered); unset = as fast as answered over `connections`.
   * autocannon's own rate option is not used for this: it sends each second's quota in a
   * burst at the start of the second, so "half load" would queue half a second of work at
   * once and measure the burst, not the service at that rate.
   */
  overallRate?: number;
  /**
   * Closed loop with a window (B5 capacity): `connections` loops send as fast as answered
   * while fewer than `limit` accepted units are unfinished; `finishedSql` (with `params`)
   * reads how many have finished so far.
   */
  window?: { databaseUrl: string; finishedSql: string; params: unknown[]; limit: number };
}

export interface LoadResult {
  durationSec: number;
  total: number;
  /** 2xx answers per second over the measured run. */
  okPerSec: number;
  byStatus: Record<string, number>;
  errors: number;
  timeouts: number;
  latencyMs: { p50: number; p90: number; p99: number; max: number; mean: number };
}

/**
 * Runs one load in a child process (scripts/bench/dist/load-child.js) and returns its
 * result. The meter, when given, sees the child as "load".
 */
export async function runLoad(spec: LoadSpec, options: { logDir: string; name: string; meter?: CpuMeter }): Promise<LoadResult> {
  const child = startNode(options.name, path.join(__dirname, 'load-child.js'), {
    env: { BENCH_LOAD_SPEC: JSON.stringify(spec) },
    logDir: options.logDir,
    capture: true,
  });
  options.meter?.label(child.pid, 'load');
  const { code, signal } = await child.exited;
  const lastLine = child.stdout().trim().split('\n').pop() ?? '';
  if (code !== 0 || !lastLine.startsWith('{')) {
    throw new Error(`load ${options.name} failed (${signal ?? code}); see ${child.logFile}`);
  }
  return JSON.parse(lastLine) as LoadResult;
}

/** Answers outside `allowed` (e.g. 202 and 429 for submits), plus socket errors and timeouts. */
export function unexpected(r: LoadResult, allowed: string[]): { count: number; detail: string } {
  let count = r.errors;
  const parts: string[] = [];
  for (const [code, n] of Object.entries(r.byStatus)) {
    if (!allowed.includes(code)) {
      count += n;
      parts.push(`${n}×${code}`);
    }
  }
  if (r.errors) parts.push(`${r.errors} socket errors (${r.timeouts} timeouts)`);
  return { count, detail: parts.join(', ') };
}
