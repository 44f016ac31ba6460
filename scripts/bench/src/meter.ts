import { readdirSync, readFileSync } from 'node:fs';
import { childPids } from '@tes/testing';

/**
 * Where the CPU went during a benchmark, read from /proc: each labelled child, all
 * PostgreSQL processes, RabbitMQ (beam.smp), the harness itself (it serves the embedded S3)
 * interrupt time ("kernel-irq", mostly the benchmark's own loopback traffic) and everything
 * else on the machine ("other": other engineers' tests on a shared machine, i.e. the noise). 100 % is one core; the machine has os.cpus().length of them.
 *
 * Sampled every 500 ms and summed per pid between samples, so short-lived processes
 * (pgbench's backends) are counted up to their last sample.
 */
const TICKS_PER_SEC = 100; // USER_HZ on Linux

/** A process's name, CPU ticks so far (utime + stime, all its threads) and parent, from /proc/PID/stat. */
function readStat(pid: number | string): { comm: string; ticks: number; ppid: number } | undefined {
  try {
    const s = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const close = s.lastIndexOf(')');
    const comm = s.slice(s.indexOf('(') + 1, close);
    const f = s.slice(close + 2).split(' ');
    // fields after ")" start at field 3 (state); ppid is field 4, utime 14, stime 15
    return { comm, ticks: Number(f[11]) + Number(f[12]), ppid: Number(f[1]) };
  } catch {
    return undefined;
  }
}

/** Machine-wide ticks from /proc/stat: busy (user+nice+system+irq+softirq+steal; guest is inside user) and irq. */
function machineBusyTicks(): { busy: number; irq: number } {
  const line = readFileSync('/proc/stat', 'utf8').split('\n')[0]!;
  const [user = 0, nice = 0, system = 0, , , irq = 0, softirq = 0, steal = 0] = line.trim().split(/\s+/).slice(1).map(Number);
  return { busy: user + nice + system + irq + softirq + steal, irq: irq + softirq };
}

/** A process's CPU so far (utime + stime, all its threads), in ms; NaN once it is gone. */
export function cpuMsOf(pid: number): number {
  const st = readStat(pid);
  return st ? (st.ticks * 1000) / TICKS_PER_SEC : NaN;
}

export class CpuMeter {
  private readonly labels = new Map<number, string>();
  private last = new Map<number, { label: string; ticks: number }>();
  private sums = new Map<string, number>();
  private machineStart = machineBusyTicks();
  private started = Date.now();
  private timer: NodeJS.Timeout | undefined;

  label(pid: number, name: string): void {
    this.labels.set(pid, name);
  }

  private classify(pid: number, comm: string, ppid: number): string {
    // a labelled process's children (the gateway's cluster processes) count as that process
    const known = this.labels.get(pid) ?? this.labels.get(ppid);
    if (known) return known;
    if (pid === process.pid) return 'harness+s3';
    if (comm.startsWith('postgres') || comm === 'postmaster') return 'postgres';
    if (comm === 'beam.smp' || comm.startsWith('erl_') || comm === 'epmd') return 'rabbitmq';
    return '';
  }

  private sample(): void {
    const now = new Map<number, { label: string; ticks: number }>();
    for (const entry of readdirSync('/proc')) {
      if (!/^\d+$/.test(entry)) continue;
      const pid = Number(entry);
      const st = readStat(pid);
      if (!st) continue;
      const label = this.classify(pid, st.comm, st.ppid);
      if (!label) continue;
      now.set(pid, { label, ticks: st.ticks });
      const before = this.last.get(pid);
      const delta = before ? st.ticks - before.ticks : this.last.size === 0 ? 0 : st.ticks;
      if (delta > 0) this.sums.set(label, (this.sums.get(label) ?? 0) + delta);
    }
    this.last = now;
  }

  start(): void {
    this.sums = new Map();
    this.last = new Map();
    this.sample();
    this.machineStart = machineBusyTicks();
    this.started = Date.now();
    this.timer = setInterval(() => this.sample(), 500);
    this.timer.unref(); // never what keeps the harness alive
  }

  /** CPU % per label over the interval since start(), "other" included. */
  stop(): Record<string, number> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    this.sample();
    const seconds = (Date.now() - this.started) / 1000;
    const end = machineBusyTicks();
    const out: Record<string, number> = {};
    let known = 0;
    for (const [label, ticks] of this.sums) {
      out[label] = Math.round((ticks / TICKS_PER_SEC / seconds) * 100);
      known += ticks;
    }
    // /proc/stat counts in the same USER_HZ ticks, summed over every core. Interrupt time
    // (mostly loopback networking of this very benchmark) belongs to no process.
    const irq = end.irq - this.machineStart.irq;
    const other = end.busy - this.machineStart.busy - irq - known;
    out['kernel-irq'] = Math.round((irq / TICKS_PER_SEC / seconds) * 100);
    out.other = Math.max(0, Math.round((other / TICKS_PER_SEC / seconds) * 100));
    return out;
  }
}

/** VmRSS of a process in MB (`VmHWM`: its peak since it started; `RssAnon`: its anonymous part), or undefined once it is gone. */
export function rssMb(pid: number, field: 'VmRSS' | 'VmHWM' | 'RssAnon' = 'VmRSS'): number | undefined {
  try {
    const m = new RegExp(`${field}:\\s+(\\d+)\\s+kB`).exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Samples the RSS of named processes every 250 ms; peak and mean per name. A name whose
 * process has children (the gateway with GATEWAY_PROCESSES > 1) is judged per process: each
 * sample is the largest of the process and its children, as the target is per process.
 */
export class RssSampler {
  private readonly samples = new Map<string, number[]>();
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly pids: Record<string, number>) {}

  start(): void {
    const take = () => {
      for (const [name, pid] of Object.entries(this.pids)) {
        const each = [pid, ...childPids(pid)].map((p) => rssMb(p)).filter((v): v is number => v !== undefined);
        if (each.length > 0) (this.samples.get(name) ?? this.samples.set(name, []).get(name)!).push(Math.max(...each));
      }
    };
    take();
    this.timer = setInterval(take, 250);
    this.timer.unref();
  }

  stop(): Record<string, { peakMb: number; meanMb: number }> {
    if (this.timer) clearInterval(this.timer);
    const out: Record<string, { peakMb: number; meanMb: number }> = {};
    for (const [name, v] of this.samples) {
      out[name] = { peakMb: Math.max(...v), meanMb: v.reduce((a, b) => a + b, 0) / v.length };
    }
    return out;
  }
}
