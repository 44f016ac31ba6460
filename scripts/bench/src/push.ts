import { rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { childPids } from '@tes/testing';
import { submitSpec } from './bench-http';
import { dbNow, drain, measureCapacity } from './e2e';
import { runLoad } from './http-load';
import { rssMb, type CpuMeter } from './meter';
import type { BenchOptions } from './options';
import { sleep, startNode, type Child } from './procs';
import type { B7Run, B7Spec, B8Result, B8Spec, Strategy } from './push-child';
import { quantile } from './push-io';
import type { Report } from './report';
import { submitBody, submitMany, type Tenant } from './seed';
import type { ServiceStack } from './stack';
import { runB9 } from './webhooks-bench';

/**
 * B7-B9, results without polling (issue #13), on one worker that runs the test and image
 * categories:
 *   B7  wall time of one image.render 256×256, learnt three ways, one run after another:
 *       polling as the 202's Retry-After says (the baseline), `Prefer: wait=30` on the submit,
 *       and the event stream;
 *   B8  one gateway holding `streams` event streams open: its memory per stream, and change →
 *       event latency of probe executions under B5's half load, next to a raw LISTEN's;
 *   B9  webhooks (webhooks-bench.ts).
 */
export interface PushContext {
  stack: ServiceStack;
  tenants: Tenant[];
  /** The test.sleep 0 s submit body of B3-B5 (the half load's). */
  body: Record<string, unknown>;
  o: BenchOptions;
  logDir: string;
  meter: CpuMeter;
  report: Report;
  /** B5's capacity (executions/s) when B5 ran in this run; measured here otherwise. */
  capacityPerSec: number | undefined;
}

/** The image worker's concurrency in deploy/k8s/base/worker-image.yaml (WORKER_CONCURRENCY). */
const IMAGE_CONCURRENCY = 4;
const IMAGE_ARGUMENTS = { text: 'bench', width: 256, height: 256 };
/** B8's probes: two 50 ms steps, so most of their changes happen after their stream is open. */
const PROBE_ARGUMENTS = { seconds: 0.05, steps: 2, costMicrosPerStep: 1 };
const PROBES_PER_SEC = 10;

const say = (s: string) => process.stderr.write(`bench: ${s}\n`);

export async function runPush(ctx: PushContext): Promise<void> {
  const { stack, o, meter } = ctx;
  // B8's idle executions are submitted with no worker running and their messages dropped, so
  // they stay queued and silent for the run (the stack's dispatch deadline is an hour); the
  // purge also drops B1-B4's messages, which no worker ran.
  await stack.purgeTestQueue();
  let idle: B8Spec['idle'] = [];
  if (o.only.has('b8')) {
    say(`B8: ${o.streams} executions for idle streams`);
    idle = await submitMany(stack.baseUrl, ctx.tenants, ctx.body, o.streams, `bench-idle-${stack.id}`);
    await outboxPublished(stack);
    await stack.purgeTestQueue();
  }
  const worker = await stack.startWorker(`test:${o.concurrency},image:${IMAGE_CONCURRENCY}`);
  meter.label(worker.pid, 'worker');
  try {
    if (o.only.has('b7')) {
      say(`B7: image.render 256×256, ${o.pushRuns} runs each of polling, Prefer: wait and the event stream`);
      await runB7(ctx);
    }
    if (!o.only.has('b8') && !o.only.has('b9')) return;
    let capacity = ctx.capacityPerSec;
    if (capacity === undefined) {
      say('B8/B9: B5 did not run; measuring the capacity for their half load');
      const since = await dbNow(stack.db);
      capacity = (await measureCapacity(stack, { ...submitSpec(ctx.tenants, ctx.body), url: stack.baseUrl }, o, ctx.logDir, meter, 'push-capacity')).perSec;
      await drain(stack.db, since, o.drainLimitSec);
    }
    const rate = Math.max(1, Math.floor(capacity / 2));
    if (o.only.has('b8')) {
      say(`B8: ${idle.length} open streams on one gateway, probes at ${PROBES_PER_SEC}/s under a half load of ${rate}/s`);
      await runB8(ctx, idle, rate);
    }
    if (o.only.has('b9')) {
      say(`B9: webhooks at a half load of ${rate}/s, then a receiver that answers 500 for 10 s`);
      await runB9(ctx, rate);
    }
  } finally {
    await stack.stopWorker();
  }
}

/** Waits (bounded) until the gateway has published every outbox row, so a purge drops their messages. */
async function outboxPublished(stack: ServiceStack): Promise<void> {
  for (let i = 0; i < 100; i++) {
    const r = await stack.db.raw<{ rows: { n: string }[] }>('SELECT count(*) AS n FROM outbox WHERE published_at IS NULL');
    if (Number(r.rows[0]!.n) === 0) return;
    await sleep(100);
  }
  throw new Error('B8: outbox rows still unpublished after 10 s');
}

/** A child of push-child.js with its spec; resolves with its JSON line. */
async function pushChild<T>(name: string, spec: B7Spec | B8Spec, ctx: PushContext, whileRunning?: (child: Child) => Promise<void>): Promise<T> {
  // in a file: B8's list of idle streams is larger than an environment variable may be. It
  // holds API keys (of this run's throwaway database): removed once the child is done.
  const specFile = path.join(ctx.logDir, `${name}.spec.json`);
  writeFileSync(specFile, JSON.stringify(spec), { mode: 0o600 });
  const child = startNode(name, path.join(__dirname, 'push-child.js'), { env: { BENCH_PUSH_SPEC_FILE: specFile }, logDir: ctx.logDir, capture: true });
  ctx.meter.label(child.pid, 'push-client');
  const during = whileRunning?.(child);
  const [{ code, signal }] = await Promise.all([child.exited, during]).finally(() => rmSync(specFile, { force: true }));
  const line = child.stdout().trim().split('\n').pop() ?? '';
  if (code !== 0 || !line.startsWith('{')) throw new Error(`${name} failed (${signal ?? code}); see ${child.logFile}`);
  return JSON.parse(line) as T;
}

const STRATEGIES: [Strategy, string][] = [
  ['poll', 'polling (Retry-After)'],
  ['wait', 'Prefer: wait=30'],
  ['stream', 'event stream'],
];

async function runB7(ctx: PushContext): Promise<void> {
  const { stack, o, report, meter } = ctx;
  const secret = ctx.tenants[0]!.secret;
  const body = await submitBody(stack.baseUrl, secret, 'image.render', IMAGE_ARGUMENTS);
  meter.start();
  const { runs } = await pushChild<{ runs: B7Run[] }>(
    'push-b7',
    { mode: 'b7', baseUrl: stack.baseUrl, secret, tool: 'image.render', body, runs: o.pushRuns },
    ctx,
  );
  report.cpuOf('B7 sequential runs', meter.stop());
  const wall = (s: Strategy) => runs.filter((r) => r.strategy === s).map((r) => r.wallMs);
  const p = (s: Strategy, q: number) => quantile(wall(s), q);
  const poll50 = p('poll', 0.5);
  const poll99 = p('poll', 0.99);
  for (const [s, label] of STRATEGIES.slice(1)) {
    report.add({
      figure: `B7 image.render 256² wall p50, ${label}`,
      value: p(s, 0.5),
      unit: 'ms',
      baseline: 'polling',
      baselineValue: poll50,
      target: '≤ 300 ms',
      met: p(s, 0.5) <= 300,
    });
    report.add({ figure: `B7 image.render 256² wall p99, ${label}`, value: p(s, 0.99), unit: 'ms', baseline: 'polling', baselineValue: poll99 });
  }
  const failed = runs.filter((r) => r.status !== 'succeeded');
  if (failed.length) report.note(`B7: ${failed.length} runs did not succeed (${failed.map((r) => `${r.strategy} ${r.executionId} ${r.status}`).join(', ')})`);

  // What the wall is made of, from the database: the execution itself, for every run.
  const q = await stack.db.raw<{ rows: Record<string, number | null>[] }>(
    `SELECT ${['e.started_at - e.created_at', 's.finished_at - s.started_at', 'e.finished_at - e.created_at']
      .map((iv, i) => `percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM ${iv}) * 1000) AS m${i}`)
      .join(', ')}
       FROM executions e JOIN execution_steps s ON s.execution_id = e.id AND s.index = 0
      WHERE e.id = ANY(?::text[])`,
    [runs.map((r) => r.executionId)],
  );
  const legs = q.rows[0] ?? {};
  const requests = (s: Strategy) => runs.filter((r) => r.strategy === s).reduce((a, r) => a + r.requests, 0) / Math.max(1, wall(s).length);
  report.note(
    `B7 (${wall('poll').length} runs each, interleaved, one unmeasured warmup): p50/p99 ms — ${STRATEGIES.map(([s, l]) => `${l} ${p(s, 0.5).toFixed(0)}/${p(s, 0.99).toFixed(0)} (${requests(s).toFixed(1)} requests)`).join(', ')}. ` +
      `In the database, p50: accept→running ${fmtMs(legs.m0)}, the render step ${fmtMs(legs.m1)}, accept→succeeded ${fmtMs(legs.m2)}`,
  );
  for (const [s] of STRATEGIES) {
    report.figure(`b7${cap(s)}P50Ms`, p(s, 0.5));
    report.figure(`b7${cap(s)}P99Ms`, p(s, 0.99));
  }
  report.figure('b7ServerAcceptToSucceededP50Ms', legs.m2);
  report.figure('b7Runs', wall('poll').length);
}

const cap = (s: string) => s[0]!.toUpperCase() + s.slice(1);
const fmtMs = (v: number | null | undefined) => (typeof v === 'number' ? `${v.toFixed(1)} ms` : '—');

/**
 * The gateway's memory: VmRSS (MB) of it and its processes, median of five samples 200 ms
 * apart, and the V8 heap in use (MB) as its /metrics reports it (garbage included).
 */
async function gatewayMemory(stack: ServiceStack): Promise<{ rss: number; heap: number }> {
  const samples: number[] = [];
  for (let i = 0; i < 5; i++) {
    if (i) await sleep(200);
    samples.push([stack.gateway.pid, ...childPids(stack.gateway.pid)].reduce((a, pid) => a + (rssMb(pid) ?? 0), 0));
  }
  const text = await fetch(`${stack.metricsUrl.gateway}/metrics`)
    .then((r) => r.text())
    .catch(() => '');
  const heap = /^nodejs_heap_size_used_bytes(?:\{[^}]*\})? (\S+)$/m.exec(text);
  return { rss: quantile(samples, 0.5), heap: heap ? Number(heap[1]) / 2 ** 20 : NaN };
}

async function runB8(ctx: PushContext, idle: B8Spec['idle'], rate: number): Promise<void> {
  const { stack, o, report, meter } = ctx;
  const probeBody = await submitBody(stack.baseUrl, ctx.tenants[0]!.secret, 'test.sleep', PROBE_ARGUMENTS);
  // the gateway's RSS with no stream, half of them and all of them open
  const mem = [await gatewayMemory(stack)];
  let cpu: Record<string, number> | undefined;
  let load: Awaited<ReturnType<typeof runLoad>> | undefined;
  const spec: B8Spec = {
    mode: 'b8',
    baseUrl: stack.baseUrl,
    databaseUrl: stack.databaseUrl,
    idle,
    probe: { secrets: ctx.tenants.map((t) => t.secret), body: probeBody, ratePerSec: PROBES_PER_SEC, warmupSec: o.warmupSec, durationSec: o.pushSec },
  };
  const r = await pushChild<B8Result>('push-b8', spec, ctx, async (child) => {
    const opened = await new Promise<boolean>((resolve) => {
      child.proc.on('message', (m: { type?: string }) => {
        if (m.type !== 'opened') return;
        void (async () => {
          await sleep(2_000); // let the opening settle (buffers, a GC) before reading the RSS
          mem.push(await gatewayMemory(stack));
          if (mem.length === 3) resolve(true);
          else child.proc.send({ type: 'go' });
        })();
      });
      void child.exited.then(() => resolve(false));
    });
    if (!opened) return;
    meter.start();
    child.proc.send({ type: 'go' });
    load = await runLoad(
      {
        ...submitSpec(ctx.tenants, ctx.body),
        url: stack.baseUrl,
        connections: o.concurrency,
        warmupSec: o.warmupSec,
        durationSec: o.pushSec,
        overallRate: rate,
      },
      { logDir: ctx.logDir, name: 'b8-half-load', meter },
    );
    cpu = meter.stop();
  });
  report.cpuOf('B8 streams + half load', cpu);
  const stillQueued = await stack.db.raw<{ rows: { n: string }[] }>(`SELECT count(*) AS n FROM executions WHERE id = ANY(?::text[]) AND status = 'queued'`, [
    idle.map((t) => t.executionId),
  ]);
  const [before = NaN, middle = NaN, after = NaN] = mem.map((m) => m.rss);
  const perStreamKb = ((after - before) * 1024) / Math.max(1, r.idleOpened);
  const heapKb = (((mem[2]?.heap ?? NaN) - (mem[0]?.heap ?? NaN)) * 1024) / Math.max(1, r.idleOpened);
  const slow = bursts(r.timeline, SLOW_MS);
  const [s50, s99, f50, f99, g99] = [
    quantile(r.streamMs, 0.5),
    quantile(r.streamMs, 0.99),
    quantile(r.floorMs, 0.5),
    quantile(r.floorMs, 0.99),
    quantile(r.gatewayMs, 0.99),
  ];
  report.add({ figure: `B8 gateway RSS with ${r.idleOpened} open streams`, value: after, unit: 'MB', baseline: 'before', baselineValue: before, ratio: null });
  report.add({ figure: 'B8 gateway memory per open stream (RSS)', value: perStreamKb, unit: 'KB', baseline: 'V8 heap', baselineValue: heapKb, ratio: null });
  report.add({ figure: `B8 change→event p99 @ ${rate}/s + ${r.idleOpened} streams`, value: s99, unit: 'ms', baseline: 'LISTEN', baselineValue: f99 });
  report.add({ figure: 'B8 change→event p50', value: s50, unit: 'ms', baseline: 'LISTEN', baselineValue: f50 });
  const lost = r.idleFailed + r.idleLost + r.probeFailed + r.probeUnfinished;
  report.add({ figure: 'B8 streams refused, broken or unfinished', value: lost, unit: '', target: '= 0', met: lost === 0 });
  report.note(
    `B8: ${r.idleOpened} idle streams opened in ${r.openSec.toFixed(1)} s (${Number(stillQueued.rows[0]!.n)} of their executions still queued at the end); ` +
      `${r.probes} probes (test.sleep 2 × 50 ms) at ${PROBES_PER_SEC}/s over ${o.pushSec} s, ${r.streamMs.length} events timed (${r.untimedEvents} without a new timestamp), ` +
      `${r.floorMs.length} matched to their notification; notification here → event p99 ${g99.toFixed(1)} ms (the gateway's share); ` +
      `half load ${load?.okPerSec.toFixed(1) ?? '—'}/s submitted (asked ${rate}/s); gateway RSS ${before.toFixed(0)} → ${middle.toFixed(0)} → ${after.toFixed(0)} MB and V8 heap used ${mem.map((m) => m.heap.toFixed(1)).join(' → ')} MB with 0, ${r.halves[0]} and ${r.idleOpened} streams (RSS grows in the heap's steps)`,
  );
  report.note(`B8 events the gateway held more than ${SLOW_MS} ms after its notification arrived here: ${slow}`);
  if (lost)
    report.note(
      `B8: ${r.idleFailed} idle streams refused, ${r.idleLost} ended early; ${r.probeFailed} probes failed, ${r.probeUnfinished} saw no terminal event`,
    );
  report.figure('b8Streams', r.idleOpened);
  report.figure('b8RssBeforeMb', before);
  report.figure('b8RssAfterMb', after);
  report.figure('b8KbPerStream', perStreamKb);
  report.figure('b8HeapKbPerStream', heapKb);
  report.figure('b8EventP50Ms', s50);
  report.figure('b8EventP99Ms', s99);
  report.figure('b8ListenP50Ms', f50);
  report.figure('b8ListenP99Ms', f99);
  report.figure('b8GatewayShareP99Ms', g99);
  report.figure('b8Events', r.streamMs.length);
  report.figure('b8HalfLoadRate', rate);
  report.figure('b8Lost', lost);
}

/** Events the gateway took longer than this to bring (after the notification) are listed by when they came (B8's note). */
const SLOW_MS = 50;

/**
 * Where the slow events of a timeline fall: grouped into bursts (less than a second between
 * neighbours), each with its start (s after the probes began), length and size. Bursts 15 s
 * apart are the ChangeHub's periodic re-read of every watched execution.
 */
function bursts(timeline: [number, number][], slowMs: number): string {
  const slow = timeline.filter(([, ms]) => ms > slowMs).sort((a, b) => a[0] - b[0]);
  if (slow.length === 0) return 'none';
  const groups: [number, number][][] = [];
  for (const e of slow) {
    const last = groups.at(-1);
    if (last && e[0] - last.at(-1)![0] < 1_000) last.push(e);
    else groups.push([e]);
  }
  const desc = groups.map(
    (g) =>
      `${g.length} at ${(g[0]![0] / 1000).toFixed(1)} s (over ${((g.at(-1)![0] - g[0]![0]) / 1000).toFixed(2)} s, worst ${Math.max(...g.map(([, ms]) => ms)).toFixed(0)} ms)`,
  );
  return `${slow.length} of ${timeline.length}, in ${groups.length} burst(s): ${desc.join('; ')}`;
}
