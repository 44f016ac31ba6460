import type { Knex } from 'knex';
import type { Cluster, ServiceName } from './cluster';
import type { Answered } from './soak-load';
import { percentile, type Sample } from './soak-sampler';

/**
 * The soak's end: whole-run figures, memory growth per process and the warnings and errors
 * the services logged, as a table for people and one JSON line for machines.
 *
 * Memory growth compares the average RSS of the load phase's first minute with its last.
 * For the gateway and the relay (never restarted) that is a leak check; the workers are
 * SIGKILLed and restarted every other minute, so theirs only shows a fresh process's size.
 */
export interface Growth {
  firstMinuteMb: number | null;
  lastMinuteMb: number | null;
  growthMb: number | null;
  growthPct: number | null;
}

const avg = (xs: number[]) => (xs.length ? Math.round((xs.reduce((a, b) => a + b, 0) / xs.length) * 10) / 10 : null);
const maxOf = (xs: (number | null)[]) => xs.reduce<number | null>((m, x) => (x === null ? m : m === null ? x : Math.max(m, x)), null);

export function memoryGrowth(samples: Sample[], loadSeconds: number): Record<string, Growth> {
  const out: Record<string, Growth> = {};
  const names = [...new Set(samples.flatMap((s) => Object.keys(s.rssMb)))];
  for (const name of names) {
    const at = (from: number, to: number) =>
      avg(
        samples
          .filter((s) => s.t > from && s.t <= to)
          .map((s) => s.rssMb[name])
          .filter((x): x is number => typeof x === 'number'),
      );
    // samples land at t ≈ 10, 20, … s (a little after): six in each window
    const first = at(5, 65);
    const last = at(loadSeconds - 55, loadSeconds + 5);
    const growth = first !== null && last !== null ? Math.round((last - first) * 10) / 10 : null;
    out[name] = {
      firstMinuteMb: first,
      lastMinuteMb: last,
      growthMb: growth,
      growthPct: growth !== null && first ? Math.round((growth / first) * 1000) / 10 : null,
    };
  }
  return out;
}

/** Accept→succeeded over every execution of the load phase (database clock). */
export async function wholeRunE2e(db: Knex, keyPrefix: string): Promise<{ n: number; p50Ms: number | null; p99Ms: number | null; maxMs: number | null }> {
  const row = (
    await db.raw<{ rows: { n: number; p50: number | null; p99: number | null; max: number | null }[] }>(
      `SELECT count(*)::int AS n,
              percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM finished_at - created_at)) AS p50,
              percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM finished_at - created_at)) AS p99,
              max(extract(epoch FROM finished_at - created_at)) AS max
         FROM executions WHERE status = 'succeeded' AND idempotency_key LIKE ?`,
      [`${keyPrefix}%`],
    )
  ).rows[0]!;
  const ms = (x: number | null) => (x === null ? null : Math.round(x * 1000));
  return { n: row.n, p50Ms: ms(row.p50), p99Ms: ms(row.p99), maxMs: ms(row.max) };
}

/** Warn and error lines each service printed (every incarnation), counted by message. */
export function logDigest(c: Cluster, services: readonly ServiceName[]): Record<string, Record<string, number>> {
  const out: Record<string, Record<string, number>> = {};
  for (const s of services) {
    const counts: Record<string, number> = {};
    for (const line of c.lines(s)) {
      let level: string;
      let message = line.slice(0, 120);
      try {
        const rec = JSON.parse(line) as { level?: string; message?: string };
        level = rec.level ?? '';
        message = rec.message ?? message;
      } catch {
        level = /error|exception/i.test(line) ? 'error' : ''; // not JSON: a crash trace or a runtime warning
      }
      if (level === 'warn' || level === 'error') counts[`${level} ${message}`] = (counts[`${level} ${message}`] ?? 0) + 1;
    }
    out[s] = counts;
  }
  return out;
}

export function submitFigures(answered: Answered[]): { n: number; p50Ms: number | null; p99Ms: number | null; maxMs: number | null } {
  const ms = answered.map((a) => a.ms);
  return { n: ms.length, p50Ms: percentile(ms, 50), p99Ms: percentile(ms, 99), maxMs: maxOf(ms) };
}

export function windowWorst(samples: Sample[]): Record<string, number | null> {
  return {
    submitP99Ms: maxOf(samples.map((s) => s.submitP99Ms)),
    e2eP99Ms: maxOf(samples.map((s) => s.e2eP99Ms)),
    outboxLagS: maxOf(samples.map((s) => s.outboxLagMaxS)),
    queueDepth: maxOf(samples.map((s) => s.queueDepth)),
    openExecutions: maxOf(samples.map((s) => s.open)),
  };
}

/** A plain-text table: rows of [label, value]. */
export function table(title: string, rows: [string, string][]): string {
  if (rows.length === 0) return `${title}\n  (none)`;
  const w = Math.max(...rows.map((r) => r[0].length));
  return [title, ...rows.map(([k, v]) => `  ${k.padEnd(w)}  ${v}`)].join('\n');
}

export function growthTable(growth: Record<string, Growth>): string {
  const f = (x: number | null, u = '') => (x === null ? '-' : `${x}${u}`);
  const rows: [string, string][] = Object.entries(growth).map(([name, g]) => [
    name,
    `${f(g.firstMinuteMb, ' MB')} → ${f(g.lastMinuteMb, ' MB')}  (${g.growthMb !== null && g.growthMb >= 0 ? '+' : ''}${f(g.growthMb, ' MB')}, ${f(g.growthPct, ' %')})`,
  ]);
  return table('RSS, first minute average → last minute average (workers are restarted every other minute)', rows);
}
