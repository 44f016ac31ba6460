import { readFile } from 'node:fs/promises';
import http from 'node:http';
import type { Knex } from 'knex';
import { oldestUnsentAgeSeconds } from '@tes/db';
import type { Cluster, Instance } from './cluster';
import type { Answered, SteadyLoad } from './soak-load';

/**
 * What the soak watches, every `everyMs` (10 s): outbox lag (the oldest unsent outbox row,
 * read from the database every second, the window's maximum kept; and the relay's
 * tes_outbox_lag_seconds gauge), lease expiries (the relay's tes_lease_expiries_total),
 * queue depth (the relay's tes_queue_depth, all queues), RSS of every service process
 * (/proc/<pid>/status VmRSS), client-side submit latency p50/p99 (resends included) and
 * accept→succeeded p50/p99 of the executions that ended in the window (executions table,
 * database clock). One line per sample is printed as it is taken.
 */
export interface Sample {
  t: number;
  sent: number;
  answered: number;
  inFlight: number;
  ended: number;
  notSucceeded: number;
  open: number;
  submitP50Ms: number | null;
  submitP99Ms: number | null;
  e2eP50Ms: number | null;
  e2eP99Ms: number | null;
  outboxLagMaxS: number;
  outboxLagGaugeS: number | null;
  leaseExpiries: number | null;
  queueDepth: number | null;
  rssMb: Record<string, number | null>;
  events: string[];
}

export function percentile(xs: number[], p: number): number | null {
  if (xs.length === 0) return null;
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

/** GET a text body on loopback (no keep-alive); null when unreachable. */
function httpText(url: string, timeoutMs = 2_000): Promise<string | null> {
  return new Promise((resolve) => {
    const req = http.get(url, { agent: false, timeout: timeoutMs }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve(res.statusCode === 200 ? body : null));
      res.on('error', () => resolve(null));
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(null));
  });
}

/** Sum of every series of a metric in Prometheus text; null when absent. */
function metricSum(text: string | null, name: string): number | null {
  if (!text) return null;
  let sum: number | null = null;
  for (const line of text.split('\n')) {
    if (line.startsWith(`${name}{`) || line.startsWith(`${name} `)) sum = (sum ?? 0) + Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return sum;
}

async function rssMb(pid: number | undefined): Promise<number | null> {
  if (!pid) return null;
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(await readFile(`/proc/${pid}/status`, 'utf8'));
    return m ? Math.round(Number(m[1]) / 102.4) / 10 : null;
  } catch {
    return null; // the process just died (a kill this window)
  }
}

const round = (x: number | null, digits = 0) => (x === null ? null : Math.round(x * 10 ** digits) / 10 ** digits);

export class Sampler {
  readonly samples: Sample[] = [];
  private events: string[] = [];
  private lagMax = 0;
  private sent = 0;
  private answeredSeen = 0;
  private dbClock: Date | undefined;
  private on = false;
  private loops: Promise<void>[] = [];
  private readonly wake = new Set<() => void>();
  private readonly t0 = Date.now();

  constructor(
    private readonly c: Cluster,
    private readonly load: SteadyLoad,
    private readonly instances: Instance[],
    private readonly everyMs: number,
    private readonly print: (line: string) => void,
  ) {}

  /** Seconds since the sampler started. */
  get elapsedS(): number {
    return Math.round((Date.now() - this.t0) / 100) / 10;
  }

  /** Marks something that happened (a kill, the broker stopping) in the current window. */
  note(event: string): void {
    this.events.push(`${this.elapsedS}s ${event}`);
    this.print(`  [${this.elapsedS}s] ${event}`);
  }

  async start(): Promise<void> {
    this.on = true;
    this.dbClock = await this.now();
    this.loops.push(
      this.every(1_000, () => this.lag()),
      this.every(this.everyMs, async () => {
        await this.sample();
      }),
    );
  }

  /** Stops both loops, waking their pauses (no timer outlives the soak). */
  async stop(): Promise<void> {
    this.on = false;
    for (const w of [...this.wake]) w();
    await Promise.all(this.loops);
  }

  private async every(ms: number, fn: () => Promise<void>): Promise<void> {
    let next = Date.now() + ms;
    while (this.on) {
      await new Promise<void>((resolve) => {
        const wake = () => {
          clearTimeout(timer);
          this.wake.delete(wake);
          resolve();
        };
        const timer = setTimeout(wake, Math.max(0, next - Date.now()));
        this.wake.add(wake);
      });
      if (!this.on) return;
      next += ms;
      await fn().catch((err: unknown) => this.print(`  sampler error: ${(err as Error).message}`));
    }
  }

  private async now(): Promise<Date> {
    return (await this.c.db.raw<{ rows: { t: Date }[] }>('SELECT now() AS t')).rows[0]!.t;
  }

  private async lag(): Promise<void> {
    this.lagMax = Math.max(this.lagMax, await oldestUnsentAgeSeconds(this.c.db));
  }

  /** Takes one sample now (also called once more after the drain). */
  async sample(): Promise<Sample> {
    const db: Knex = this.c.db;
    await this.lag().catch(() => undefined);
    const clock = await this.now();
    const e2e = (
      await db.raw<{ rows: { n: number; bad: number; p50: number | null; p99: number | null }[] }>(
        `SELECT count(*)::int AS n, (count(*) FILTER (WHERE status <> 'succeeded'))::int AS bad,
                percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM finished_at - created_at)) FILTER (WHERE status = 'succeeded') AS p50,
                percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM finished_at - created_at)) FILTER (WHERE status = 'succeeded') AS p99
           FROM executions WHERE finished_at > ? AND finished_at <= ? AND status IN ('succeeded', 'failed', 'cancelled')`,
        [this.dbClock!, clock],
      )
    ).rows[0]!;
    this.dbClock = clock;
    const open = Number((await db('executions').whereNotIn('status', ['succeeded', 'failed', 'cancelled']).count({ n: '*' }).first())!.n);
    const relay = await httpText(this.c.metricsUrl('relay'));
    const answered: Answered[] = this.load.answered.slice(this.answeredSeen);
    this.answeredSeen += answered.length;
    const rss: Record<string, number | null> = {};
    for (const i of this.instances) rss[i] = await rssMb(this.c.process(i)?.child.pid);
    const s: Sample = {
      t: this.elapsedS,
      sent: this.load.subs.length - this.sent,
      answered: answered.length,
      inFlight: this.load.inFlight,
      ended: e2e.n,
      notSucceeded: e2e.bad,
      open,
      submitP50Ms: percentile(
        answered.map((a) => a.ms),
        50,
      ),
      submitP99Ms: percentile(
        answered.map((a) => a.ms),
        99,
      ),
      e2eP50Ms: round(e2e.p50 === null ? null : e2e.p50 * 1000),
      e2eP99Ms: round(e2e.p99 === null ? null : e2e.p99 * 1000),
      outboxLagMaxS: round(this.lagMax, 2)!,
      outboxLagGaugeS: round(metricSum(relay, 'tes_outbox_lag_seconds'), 2),
      leaseExpiries: metricSum(relay, 'tes_lease_expiries_total'),
      queueDepth: metricSum(relay, 'tes_queue_depth'),
      rssMb: rss,
      events: this.events,
    };
    this.sent = this.load.subs.length;
    this.lagMax = 0;
    this.events = [];
    this.samples.push(s);
    this.print(formatSample(s));
    return s;
  }
}

const f = (x: number | null, unit = '') => (x === null ? '-' : `${x}${unit}`);

function formatSample(s: Sample): string {
  const rss = Object.entries(s.rssMb)
    .map(([k, v]) => `${k}=${f(v)}`)
    .join(' ');
  return (
    `t=${s.t.toFixed(0).padStart(5)}s sent=${s.sent} answered=${s.answered} inflight=${s.inFlight} ended=${s.ended}` +
    `${s.notSucceeded ? ` NOT-SUCCEEDED=${s.notSucceeded}` : ''} open=${s.open} queue=${f(s.queueDepth)}` +
    ` submit p50/p99=${f(s.submitP50Ms)}/${f(s.submitP99Ms)}ms accept→succeeded p50/p99=${f(s.e2eP50Ms)}/${f(s.e2eP99Ms)}ms` +
    ` outbox lag max=${s.outboxLagMaxS}s gauge=${f(s.outboxLagGaugeS)}s lease expiries=${f(s.leaseExpiries)} rssMB ${rss}` +
    (s.events.length ? ` | ${s.events.join('; ')}` : '')
  );
}
