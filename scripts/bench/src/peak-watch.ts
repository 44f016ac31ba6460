import { childPids } from '@tes/testing';
import { rssMb } from './meter';

/** One process's memory at a moment (MB): resident, its anonymous part, and the V8 heap and external memory it reports. */
export interface MemorySample {
  rssMb: number;
  anonMb: number;
  heapUsedMb?: number;
  /** The V8 heap's committed size (its spaces' total: what the process holds for it). */
  heapTotalMb?: number;
  externalMb?: number;
  /** What the bench was doing then. */
  during: string;
}

function residentMb(pid: number): { rssMb: number; anonMb: number } | undefined {
  const rss = rssMb(pid);
  return rss === undefined ? undefined : { rssMb: rss, anonMb: rssMb(pid, 'RssAnon') ?? 0 };
}

const METRIC = /^(nodejs_heap_size_used_bytes|nodejs_heap_size_total_bytes|nodejs_external_memory_bytes)\{[^}]*\} (\S+)$/gm;

/**
 * Where each service's peak resident memory happened (history-bench): every 250 ms the RSS and
 * anonymous RSS of each process (the largest of it and its children), and once a second its
 * V8 heap and external memory from its /metrics; the sample of the highest RSS is kept with the
 * step the bench was in (`during`). VmHWM says how high; this says when and of what.
 */
export class PeakWatch {
  private readonly peaks = new Map<string, MemorySample>();
  private readonly reported = new Map<string, { heapUsedMb?: number; heapTotalMb?: number; externalMb?: number }>();
  private timers: NodeJS.Timeout[] = [];
  private during = 'start';

  constructor(private readonly services: Record<string, { pid: number; metricsUrl?: string }>) {}

  start(): void {
    const take = () => {
      for (const [name, { pid }] of Object.entries(this.services)) {
        const each = [pid, ...childPids(pid)].map(residentMb).filter((v) => v !== undefined);
        if (each.length === 0) continue;
        const top = each.reduce((a, b) => (b.rssMb > a.rssMb ? b : a));
        if (top.rssMb > (this.peaks.get(name)?.rssMb ?? 0)) this.peaks.set(name, { ...top, ...this.reported.get(name), during: this.during });
      }
    };
    const scrape = async () => {
      for (const [name, { metricsUrl }] of Object.entries(this.services)) {
        if (!metricsUrl) continue;
        const text = await fetch(`${metricsUrl}/metrics`, { signal: AbortSignal.timeout(900) })
          .then((r) => r.text())
          .catch(() => '');
        const m: Record<string, number | undefined> = Object.fromEntries([...text.matchAll(METRIC)].map((x) => [x[1]!, Number(x[2]) / 1024 / 1024] as const));
        this.reported.set(name, {
          heapUsedMb: m.nodejs_heap_size_used_bytes,
          heapTotalMb: m.nodejs_heap_size_total_bytes,
          externalMb: m.nodejs_external_memory_bytes,
        });
      }
    };
    take();
    this.timers = [setInterval(take, 250), setInterval(() => void scrape(), 1000)];
    for (const t of this.timers) t.unref();
  }

  /** Names the step the samples from now on belong to. */
  step(during: string): void {
    this.during = during;
  }

  stop(): Record<string, MemorySample> {
    for (const t of this.timers) clearInterval(t);
    return Object.fromEntries(this.peaks);
  }
}
