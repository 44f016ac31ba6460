import { oldestUnsentAgeSeconds } from '@tes/db';
import { FaultClient } from './client';
import { assertFreshBuild, Cluster, httpStatus, SERVICES, sleep, type ServiceName, type ServiceProcess } from './cluster';
import { checkInvariants, waitForEnd } from './invariants';
import { RabbitCluster, type RabbitNode } from './rabbit-cluster';
import { table } from './soak-report';
import { percentile } from './soak-sampler';
import { SteadyLoad, Workload } from './soak-load';

/**
 * The distributed broker survives a node (`npm run test:faults` only; ≈3–4 minutes):
 * RabbitMQ as a three-node cluster on this machine (rabbit-cluster.ts), the compiled
 * gateway, relay and worker given all three nodes in AMQP_URL (comma-separated: each service
 * connects to the first and moves to the next when its node goes away), our quorum queues
 * declared on it by the services (three replicas each). Under a steady load of paid
 * test.sleep executions:
 *   1. node a, the one every service is connected to, is SIGKILLed (a crash), left down, and
 *      started again; the test waits until it runs in the cluster and every quorum queue has
 *      its three replicas online;
 *   2. then node b, where the services moved, is stopped cleanly (`rabbitmqctl stop`), left
 *      down, and started again.
 * Then: every accepted execution ended exactly once (succeeded, one settlement, charged what
 * its steps cost), none was claimed twice or had a step run twice, the outbox is empty, the
 * ledger audit passes, no 500 (503, the documented retry, allowed); no service restarted,
 * each reconnected to another node while its own was down. Printed: accept→end and submit
 * p50/p99 by phase (before, node down, node rejoining, between, …, after), the time each
 * service was not ready, and the cluster's recovery times. Figures: tests/faults/README.md.
 */
const RATE_PER_SECOND = 5;
const PHASE_MS = 10_000;
/** The load's first seconds (first requests of each process, JIT): a phase of their own, not "before". */
const WARM_UP_MS = 5_000;
const DOWN_MS = 12_000;
const out = (line: string) => void process.stdout.write(`${line}\n`);

let rabbit: RabbitCluster | undefined;
let cluster: Cluster | undefined;
const report: Record<string, unknown> = {};
const started = Date.now();

beforeAll(async () => {
  assertFreshBuild(); // before spending a minute on the nodes
  rabbit = await RabbitCluster.start(3);
  report.clusterStartSeconds = Math.round((Date.now() - started) / 100) / 10;
  cluster = await Cluster.start({
    amqpUrl: rabbit.url,
    // no worker is killed here: a long lease, so any second claim or rerun step is the broker's doing
    env: { WORKER_CONCURRENCY: '4', LEASE_TTL_MS: '15000' },
  });
  // the services declared the topology on node a: every quorum queue with three replicas online
  await rabbit.waitHealthy(120_000, cluster.env.AMQP_PREFIX);
}, 420_000);

afterAll(async () => {
  try {
    await cluster?.shutdown();
  } finally {
    await rabbit?.destroy();
  }
  report.totalSeconds = Math.round((Date.now() - started) / 1000);
  out(`\nbroker node loss figures:\n${JSON.stringify(report, null, 2)}`);
}, 240_000);

interface Mark {
  phase: string;
  at: number;
}

/** Samples every service's /readyz every 250 ms: for each, the periods it was not ready. */
function watchReadiness(c: Cluster): { stop(): Promise<Record<ServiceName, { from: number; to: number }[]>> } {
  const down = Object.fromEntries(SERVICES.map((s) => [s, []])) as unknown as Record<ServiceName, { from: number; to: number }[]>;
  const since = new Map<ServiceName, number>();
  let on = true;
  const loop = (async () => {
    while (on) {
      const t = Date.now();
      const codes = await Promise.all(SERVICES.map((s) => httpStatus(c.readyUrl(s), 1_000)));
      codes.forEach((code, i) => {
        const s = SERVICES[i]!;
        const from = since.get(s);
        if (code !== 200) {
          if (from === undefined) since.set(s, t);
        } else if (from !== undefined) {
          down[s].push({ from, to: t });
          since.delete(s);
        }
      });
      await sleep(250);
    }
    for (const [s, from] of since) down[s].push({ from, to: Date.now() });
  })();
  return {
    stop: async () => {
      on = false;
      await loop;
      return down;
    },
  };
}

/** Each `amqp.connection.ready` line a service printed: when, and on which node (by port). */
function connections(c: Cluster, r: RabbitCluster, s: ServiceName): { at: number; node: string }[] {
  const out: { at: number; node: string }[] = [];
  for (const line of c.lines(s)) {
    if (!line.includes('amqp.connection.ready')) continue;
    try {
      const rec = JSON.parse(line) as { timestamp: string; node?: string };
      const port = Number(rec.node?.split(':').pop());
      const node = r.nodeByPort(port);
      out.push({ at: Date.parse(rec.timestamp), node: node?.label ?? `? ${rec.node}` });
    } catch {
      // not a JSON line
    }
  }
  return out;
}

/** p50/p99/max of a list, ms, and its size. */
function stats(xs: number[]): { n: number; p50: number | null; p99: number | null; max: number | null } {
  return { n: xs.length, p50: percentile(xs, 50), p99: percentile(xs, 99), max: xs.length ? Math.max(...xs) : null };
}

const phaseOf = (marks: Mark[], t: number): string => [...marks].reverse().find((m) => m.at <= t)?.phase ?? marks[0]!.phase;

it('a node of three crashes, then another is stopped, under load: nothing lost, nothing run twice, the services move to the other nodes', async () => {
  const c = cluster!;
  const r = rabbit!;
  const prefix = c.env.AMQP_PREFIX!;
  const [a, b] = r.nodes as [RabbitNode, RabbitNode, RabbitNode];
  const before = Object.fromEntries(SERVICES.map((s) => [s, c.process(s)])) as Record<ServiceName, ServiceProcess>;
  for (const s of SERVICES) expect(connections(c, r, s).map((x) => x.node)).toEqual(['a']); // in AMQP_URL's order

  const client = new FaultClient(c.baseUrl);
  const workload = await Workload.create(c.db, client, { projects: 2, keysPerProject: 2, creditMicros: 1_000_000_000 });
  const load = new SteadyLoad(client, workload, RATE_PER_SECOND);
  const marks: Mark[] = [];
  const mark = (phase: string) => marks.push({ phase, at: Date.now() });
  const timings: Record<string, number> = {};
  const timed = async (name: string, step: () => Promise<unknown>) => {
    const t = Date.now();
    await step();
    timings[name] = Date.now() - t;
  };

  const watch = watchReadiness(c);
  mark('warm-up');
  load.start();
  try {
    await sleep(WARM_UP_MS);
    mark('before');
    await sleep(PHASE_MS);

    // 1. node a crashes: every service was connected to it, and it led every quorum queue
    mark('a down (SIGKILL)');
    await timed('a.kill', () => a.kill());
    await sleep(DOWN_MS);
    mark('a rejoining');
    await timed('a.start', () => a.start());
    await timed('a.healthy', () => r.waitHealthy(180_000, prefix));
    mark('between');
    await sleep(PHASE_MS);

    // 2. node b, where the services went, is stopped cleanly
    mark('b down (stop)');
    await timed('b.stop', () => b.stop());
    await sleep(DOWN_MS);
    mark('b rejoining');
    await timed('b.start', () => b.start());
    await timed('b.healthy', () => r.waitHealthy(180_000, prefix));
    mark('after');
    await sleep(PHASE_MS);
  } finally {
    await load.stop(); // every submission has its answer (or its resend deadline passed)
  }
  const loadEnded = Date.now();
  const notReady = await watch.stop();
  const drainMs = await waitForEnd(c.db, load.subs, false, 180_000);
  let outboxLagS = await oldestUnsentAgeSeconds(c.db);
  for (let i = 0; i < 20 && outboxLagS > 0; i++) {
    await sleep(500);
    outboxLagS = await oldestUnsentAgeSeconds(c.db);
  }

  const { problems, figures } = await checkInvariants(c.db, client, load.subs, {
    credits: workload.credits,
    allowedStatuses: [200, 202, 503],
    forbidErrorCodes: ['delivery_limit_exceeded'],
  });
  const ids = load.subs.map((s) => s.executionId).filter((x): x is string => !!x);
  const claimedTwice = Number((await c.db('executions').whereIn('id', ids).where('claims', '>', 1).count({ n: '*' }).first())!.n);
  const stepsRerun = Number((await c.db('execution_steps').whereIn('execution_id', ids).where('attempts', '>', 1).count({ n: '*' }).first())!.n);

  // latency by the phase the execution was accepted in (database clock = this machine's)
  const rows: { created_at: Date; finished_at: Date }[] = await c.db('executions').whereIn('id', ids).select('created_at', 'finished_at');
  const phases = marks.map((m) => m.phase);
  const e2e = new Map<string, number[]>(phases.map((p) => [p, []]));
  for (const row of rows) e2e.get(phaseOf(marks, row.created_at.getTime()))!.push(row.finished_at.getTime() - row.created_at.getTime());
  const submit = new Map<string, number[]>(phases.map((p) => [p, []]));
  for (const x of load.answered) submit.get(phaseOf(marks, x.at - x.ms))!.push(x.ms);
  const byPhase = phases.map((p, i) => ({
    phase: p,
    seconds: Math.round(((marks[i + 1]?.at ?? loadEnded) - marks[i]!.at) / 100) / 10,
    acceptToEndMs: stats(e2e.get(p)!),
    submitMs: stats(submit.get(p)!),
  }));

  // where each service was connected, and how long it was not ready in each outage
  const moves = Object.fromEntries(SERVICES.map((s) => [s, connections(c, r, s)]));
  const window = (from: string, to: string) => [marks.find((m) => m.phase === from)!.at, marks.find((m) => m.phase === to)!.at] as const;
  const outages = { a: window('a down (SIGKILL)', 'between'), b: window('b down (stop)', 'after') };
  // while the node was down: from its loss until the test started it again
  const down = { a: window('a down (SIGKILL)', 'a rejoining'), b: window('b down (stop)', 'b rejoining') };
  const notReadyMs = Object.fromEntries(
    SERVICES.map((s) => [
      s,
      Object.fromEntries(
        Object.entries(outages).map(([node, [from, to]]) => [
          node,
          notReady[s].filter((d) => d.to >= from && d.from <= to).reduce((sum, d) => sum + (d.to - d.from), 0),
        ]),
      ),
    ]),
  );

  const attempts = load.subs.flatMap((s) => s.attempts);
  Object.assign(report, {
    ratePerSecond: RATE_PER_SECOND,
    timingsMs: timings,
    ...figures,
    httpStatuses: client.statusSummary(),
    answered503: attempts.filter((x) => x.status === 503).length,
    lostResponses: attempts.filter((x) => x.lost).length,
    claimedTwice,
    stepsRerun,
    drainMs,
    outboxLagAfterDrainS: outboxLagS,
    connections: Object.fromEntries(Object.entries(moves).map(([s, xs]) => [s, xs.map((x) => `${x.node}@${Math.round((x.at - started) / 100) / 10}s`)])),
    notReadyMs,
    byPhase,
    problems: problems.slice(0, 20),
  });
  const f = (x: number | null) => (x === null ? '-' : String(x));
  out(
    '\n' +
      table(
        `broker node loss: ${load.subs.length} submits at ${RATE_PER_SECOND}/s; a killed ${timings['a.kill']} ms, down ${DOWN_MS / 1000} s, start ${timings['a.start']} ms, replicas online +${timings['a.healthy']} ms; b stop ${timings['b.stop']} ms, start ${timings['b.start']} ms, replicas online +${timings['b.healthy']} ms`,
        byPhase.map((p): [string, string] => [
          `${p.phase} (${p.seconds} s)`,
          `accept→end p50 ${f(p.acceptToEndMs.p50)} / p99 ${f(p.acceptToEndMs.p99)} / max ${f(p.acceptToEndMs.max)} ms (n ${p.acceptToEndMs.n}); submit p50 ${f(p.submitMs.p50)} / p99 ${f(p.submitMs.p99)} ms`,
        ]),
      ) +
      '\n' +
      table(
        'services',
        SERVICES.map((s): [string, string] => [
          s,
          `connected ${moves[s]!.map((x) => x.node).join(' → ')}; not ready ${notReadyMs[s]!.a} ms while a was out, ${notReadyMs[s]!.b} ms while b was`,
        ]),
      ) +
      `\nended ${JSON.stringify(figures.byStatus)}, statuses ${JSON.stringify(client.statusSummary())}, claimed twice ${claimedTwice}, steps rerun ${stepsRerun}, drain ${drainMs} ms, problems ${problems.length}`,
  );

  expect(problems).toEqual([]);
  expect(figures.byStatus).toEqual({ succeeded: figures.accepted });
  expect(figures.accepted).toBe(load.subs.length);
  expect(claimedTwice).toBe(0);
  expect(stepsRerun).toBe(0);
  expect(outboxLagS).toBe(0);
  for (const s of SERVICES) {
    expect(c.process(s)).toBe(before[s]); // never restarted: it reconnected by itself
    expect(before[s].exited).toBeUndefined();
    // it was connected to another node again while a was down (not once a was back: a
    // topology that cannot be declared without a, a classic queue on it, would do that)
    const xs = moves[s]!;
    expect({ service: s, movedWhileAWasDown: xs.some((x) => x.at >= down.a[0] && x.at < down.a[1] && x.node !== 'a') }).toEqual({
      service: s,
      movedWhileAWasDown: true,
    });
    // and if it was on b when b stopped, it moved on while b was down
    const onB = xs.filter((x) => x.at < down.b[0]).pop()?.node === 'b';
    if (onB) {
      expect({ service: s, movedWhileBWasDown: xs.some((x) => x.at >= down.b[0] && x.at < down.b[1] && x.node !== 'b') }).toEqual({
        service: s,
        movedWhileBWasDown: true,
      });
    }
  }
}, 600_000);
