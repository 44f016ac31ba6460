/**
 * The client of B7 and B8, in a process of its own (the harness serves S3 to the worker and must
 * not time arrivals on a loop that is busy with that). Reads a spec from BENCH_PUSH_SPEC_FILE and
 * prints one JSON line on stdout.
 *
 * b7: image.render, one run after another, three ways to learn the result (push.ts says which).
 * b8: opens `idle` event streams on executions that never change and holds them, in two
 *     halves (after each: 'opened' over IPC, then it waits for 'go', so the harness can read the
 *     gateway's memory); then submits probe executions at a steady rate, follows each on its own
 *     stream, and times every event against the change it reports and against the same change's
 *     notification on a raw LISTEN of this process.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { isTerminal, type ExecutionStatus } from '@tes/core';
import { changeTimes, NotifyLog, nowMs, openEventStream, requestJson, sleep, type EventStream, type SseEvent } from './push-io';

export interface B7Spec {
  mode: 'b7';
  baseUrl: string;
  secret: string;
  tool: string;
  body: Record<string, unknown>;
  runs: number;
}

export type Strategy = 'poll' | 'wait' | 'stream';

export interface B7Run {
  strategy: Strategy;
  wallMs: number;
  executionId: string;
  status: string;
  /** Requests the client made (submit, polls). */
  requests: number;
}

export interface B8Spec {
  mode: 'b8';
  baseUrl: string;
  databaseUrl: string;
  idle: { secret: string; executionId: string }[];
  probe: { secrets: string[]; body: Record<string, unknown>; ratePerSec: number; warmupSec: number; durationSec: number };
}

export interface B8Result {
  idleOpened: number;
  /** Streams open after each half. */
  halves: number[];
  idleFailed: number;
  /** Idle streams that ended before the probes were done (none should). */
  idleLost: number;
  openSec: number;
  probes: number;
  probeFailed: number;
  probeUnfinished: number;
  /** Per timed event: its change's database timestamp → arrival on the stream. */
  streamMs: number[];
  /** The same changes: timestamp → arrival of their notification on this process's LISTEN. */
  floorMs: number[];
  /** Notification arrival here → event arrival: what the gateway adds to the floor. */
  gatewayMs: number[];
  /** Events that carried no newer timestamp than the one before (a change without one): not timed. */
  untimedEvents: number;
  /** [arrival (ms since the probes began), gateway's share ms] of every event matched to its notification: when the slow ones came. */
  timeline: [number, number][];
}

const specFile = process.env.BENCH_PUSH_SPEC_FILE;
if (!specFile) throw new Error('BENCH_PUSH_SPEC_FILE is required');
const spec = JSON.parse(readFileSync(specFile, 'utf8')) as B7Spec | B8Spec;
const base = new URL(spec.baseUrl);
if (base.hostname !== '127.0.0.1') throw new Error(`push targets 127.0.0.1 only, got ${base.hostname}`);
const runId = randomBytes(6).toString('hex');
let counter = 0;
const idempotency = () => ({ 'idempotency-key': `bench-push-${runId}-${++counter}` });
const statusOf = (data: Record<string, unknown> | undefined): string => (typeof data?.status === 'string' ? data.status : '');
const ended = (status: string) => isTerminal(status as ExecutionStatus);

// ---- b7 ------------------------------------------------------------------------------------

/** Submit, then GET as the 202's Retry-After says until the execution has ended. */
async function viaPolling(s: B7Spec): Promise<B7Run> {
  const t0 = nowMs();
  const sub = await requestJson(base, 'POST', `/tools/${s.tool}`, s.secret, s.body, idempotency());
  const id = String(sub.body.data?.id);
  let status = statusOf(sub.body.data);
  let at = sub.at;
  let requests = 1;
  const retryAfterSec = Number(sub.headers['retry-after'] ?? 5) || 5;
  while (!ended(status)) {
    await sleep(retryAfterSec * 1000);
    const g = await requestJson(base, 'GET', `/tools/executions/${id}`, s.secret);
    requests += 1;
    status = statusOf(g.body.data);
    at = g.at;
  }
  return { strategy: 'poll', wallMs: at - t0, executionId: id, status, requests };
}

/** Submit with `Prefer: wait=30`: the answer is the result (a GET with the same header if it was not). */
async function viaWait(s: B7Spec): Promise<B7Run> {
  const t0 = nowMs();
  const sub = await requestJson(base, 'POST', `/tools/${s.tool}`, s.secret, s.body, { ...idempotency(), prefer: 'wait=30' });
  const id = String(sub.body.data?.id);
  let status = statusOf(sub.body.data);
  let at = sub.at;
  let requests = 1;
  while (!ended(status)) {
    const g = await requestJson(base, 'GET', `/tools/executions/${id}`, s.secret, undefined, { prefer: 'wait=30' });
    requests += 1;
    status = statusOf(g.body.data);
    at = g.at;
  }
  return { strategy: 'wait', wallMs: at - t0, executionId: id, status, requests };
}

/** Submit, then follow GET …/events until the event with a terminal status. */
async function viaStream(s: B7Spec): Promise<B7Run> {
  const t0 = nowMs();
  const sub = await requestJson(base, 'POST', `/tools/${s.tool}`, s.secret, s.body, idempotency());
  const id = String(sub.body.data?.id);
  if (ended(statusOf(sub.body.data))) return { strategy: 'stream', wallMs: sub.at - t0, executionId: id, status: statusOf(sub.body.data), requests: 1 };
  let last: SseEvent | undefined;
  const stream = openEventStream(base, `/tools/executions/${id}/events`, s.secret, (e) => {
    last = e;
    if (ended(statusOf(JSON.parse(e.data) as Record<string, unknown>))) stream.close();
  });
  const timeout = setTimeout(() => stream.close(), 60_000);
  await stream.ended;
  clearTimeout(timeout);
  const status = last ? statusOf(JSON.parse(last.data) as Record<string, unknown>) : '';
  if (!last || !ended(status)) throw new Error(`stream of ${id} ended without a terminal event (HTTP ${stream.status()})`);
  return { strategy: 'stream', wallMs: last.at - t0, executionId: id, status, requests: 2 };
}

async function b7(s: B7Spec): Promise<{ runs: B7Run[] }> {
  await viaWait(s); // warmup, not counted: the first render starts the worker's renderer, JIT
  const runs: B7Run[] = [];
  // interleaved, so a drift on the machine touches every strategy alike
  for (let i = 0; i < s.runs; i++) runs.push(await viaPolling(s), await viaWait(s), await viaStream(s));
  return { runs };
}

// ---- b8 ------------------------------------------------------------------------------------

const OPEN_CONCURRENCY = 50;

async function openIdle(targets: B8Spec['idle'], streams: EventStream[]): Promise<number> {
  let failed = 0;
  let next = 0;
  await Promise.all(
    Array.from({ length: OPEN_CONCURRENCY }, async () => {
      while (next < targets.length) {
        const t = targets[next++]!;
        const stream = openEventStream(base, `/tools/executions/${t.executionId}/events`, t.secret);
        try {
          await stream.first;
          streams.push(stream);
        } catch {
          failed += 1;
          stream.close();
        }
      }
    }),
  );
  return failed;
}

/** The harness's 'go' messages, each consumed by one awaitGo(). */
const goWaiters: (() => void)[] = [];
let goBanked = 0;
let goListening = false;
function awaitGo(): Promise<void> {
  if (!goListening) {
    goListening = true;
    process.on('message', (m: { type?: string }) => {
      if (m.type !== 'go') return;
      const w = goWaiters.shift();
      if (w) w();
      else goBanked += 1;
    });
  }
  if (goBanked > 0) {
    goBanked -= 1;
    return Promise.resolve();
  }
  return new Promise((resolve) => goWaiters.push(resolve));
}

interface Probe {
  id: string;
  events: SseEvent[];
  failed: boolean;
}

/** One probe: submit, then follow its stream until the terminal event (30 s at most). */
async function probe(s: B8Spec, i: number): Promise<Probe> {
  const secret = s.probe.secrets[i % s.probe.secrets.length]!;
  const sub = await requestJson(base, 'POST', '/tools/test.sleep', secret, s.probe.body, idempotency()).catch(() => undefined);
  const id = String(sub?.body.data?.id);
  if (sub?.status !== 202) return { id, events: [], failed: true };
  const stream = openEventStream(base, `/tools/executions/${id}/events`, secret);
  const timeout = setTimeout(() => stream.close(), 30_000);
  await stream.ended;
  clearTimeout(timeout);
  return { id, events: stream.events, failed: stream.status() !== 200 };
}

/** The latest of `changes` (ascending) at or before `t`. */
function latestAtOrBefore(changes: number[], t: number): number | undefined {
  let found: number | undefined;
  for (const c of changes) if (c <= t) found = c;
  return found;
}

/**
 * Times one probe's events. An event reports the newest change its execution shows (its
 * latest timestamp); the first event is the state when the stream opened, not a change. A
 * notification reports the latest change committed before it arrived; the first one per change counts.
 */
function timeProbe(p: Probe, notify: NotifyLog, out: B8Result, since: number): void {
  const views = p.events.map((e) => JSON.parse(e.data) as Record<string, unknown>);
  const final = views.at(-1);
  if (!final || !ended(statusOf(final))) {
    out.probeUnfinished += 1;
    return;
  }
  const changes = [...new Set(changeTimes(final))].sort((a, b) => a - b);
  const noteFor = new Map<number, number>();
  for (const r of notify.arrivals.get(p.id) ?? []) {
    const c = latestAtOrBefore(changes, r);
    if (c !== undefined && !noteFor.has(c)) noteFor.set(c, r);
  }
  let previous = -Infinity;
  views.forEach((view, i) => {
    const ts = Math.max(...changeTimes(view));
    if (i === 0) {
      previous = ts;
      return;
    }
    if (!(ts > previous)) {
      out.untimedEvents += 1;
      return;
    }
    previous = ts;
    const at = p.events[i]!.at;
    out.streamMs.push(at - ts);
    const r = noteFor.get(ts);
    if (r !== undefined) {
      out.floorMs.push(r - ts);
      out.gatewayMs.push(at - r);
      out.timeline.push([at - since, at - r]);
    }
  });
}

async function b8(s: B8Spec): Promise<B8Result> {
  const notify = new NotifyLog(s.databaseUrl);
  await notify.start();
  const streams: EventStream[] = [];
  const half = Math.ceil(s.idle.length / 2);
  let failed = 0;
  const halves: number[] = [];
  let openMs = 0;
  for (const part of [s.idle.slice(0, half), s.idle.slice(half)]) {
    const t = nowMs();
    failed += await openIdle(part, streams);
    openMs += nowMs() - t;
    halves.push(streams.length);
    process.send?.({ type: 'opened', opened: streams.length, failed });
    await awaitGo();
  }
  let idleLost = 0;
  for (const st of streams) void st.ended.then((how) => (idleLost += how === 'closed' ? 0 : 1));
  await sleep(s.probe.warmupSec * 1000);

  const out: B8Result = {
    idleOpened: streams.length,
    halves,
    idleFailed: failed,
    idleLost: 0,
    openSec: 0,
    probes: 0,
    probeFailed: 0,
    probeUnfinished: 0,
    streamMs: [],
    floorMs: [],
    gatewayMs: [],
    untimedEvents: 0,
    timeline: [],
  };
  out.openSec = openMs / 1000;
  // evenly spaced, open loop: probe i leaves at start + i / rate
  const total = Math.round(s.probe.ratePerSec * s.probe.durationSec);
  const start = nowMs();
  const running: Promise<Probe>[] = [];
  for (let i = 0; i < total; i++) {
    const wait = start + (i * 1000) / s.probe.ratePerSec - nowMs();
    if (wait > 0) await sleep(wait);
    running.push(probe(s, i));
  }
  const probes = await Promise.all(running);
  out.probes = probes.length;
  for (const p of probes) {
    if (p.failed) out.probeFailed += 1;
    else timeProbe(p, notify, out, start);
  }
  out.idleLost = idleLost;
  for (const st of streams) st.close();
  await notify.stop();
  return out;
}

async function main(): Promise<void> {
  const result = spec.mode === 'b7' ? await b7(spec) : await b8(spec);
  process.stdout.write(`${JSON.stringify(result)}\n`, () => process.exit(0));
}

// Backstop: whatever happens, this process ends (b7: 3 strategies × runs, each bounded by its own timeouts).
setTimeout(() => process.exit(3), 15 * 60_000).unref();
process.once('SIGTERM', () => process.exit(143));
main().catch((err: unknown) => {
  process.stderr.write(`push-child: ${(err as Error).stack}\n`);
  process.exit(1);
});
