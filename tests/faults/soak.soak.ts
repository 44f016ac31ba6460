import { FaultClient, type Submission } from './client';
import { assertFreshBuild, Cluster, sleep, type Instance, type ServiceProcess } from './cluster';
import { checkInvariants, TERMINAL, waitForEnd } from './invariants';
import { PrivatePostgres, PrivateRabbit } from './private-infra';
import { probeCapacity, SteadyLoad, Workload } from './soak-load';
import { growthTable, logDigest, memoryGrowth, submitFigures, table, wholeRunE2e, windowWorst } from './soak-report';
import { Sampler } from './soak-sampler';

/**
 * Soak (`npm run soak`, 20 minutes by default; `npm run soak -- --minutes 3` or
 * SOAK_MINUTES=3 for a short run). On a private Postgres and RabbitMQ node, the compiled
 * gateway, relay and TWO workers (WORKER_CONCURRENCY=4 each):
 *  1. capacity is probed (closed loop, test.sleep, executions ended per second);
 *  2. half of it is driven as an open-loop load from 4 projects × 2 keys for the duration;
 *     every minute one worker is SIGKILLed (alternating) and restarted, and once, mid-run,
 *     the broker is stopped for 10 s and started again;
 *  3. every 10 s a line: outbox lag, lease expiries, queue depth, RSS of every process,
 *     submit and accept→succeeded p50/p99 (soak-sampler.ts);
 *  4. then the load stops, every accepted execution must end, and the invariants of
 *     invariants.ts must hold: every 202 ended exactly once, one settlement each, balances
 *     add up, the ledger audit passes, no 5xx but the documented 503, no work failed by the
 *     faults (delivery_limit_exceeded). A summary table and one `SOAK_RESULT {json}` line end it.
 * Hazard: the load is open loop; if the service falls behind, the backlog grows for the
 * whole run and the drain is where that shows. The drain gives up once no execution has
 * ended for 2 minutes (stuck work), and the figures and invariants are still reported.
 */
function soakMinutes(): number {
  const args = (process.env.SOAK_ARGS ?? '').trim().split(/\s+/);
  const i = args.indexOf('--minutes');
  const raw = (i >= 0 ? args[i + 1] : args.find((a) => a.startsWith('--minutes='))?.slice('--minutes='.length)) ?? process.env.SOAK_MINUTES ?? '20';
  const m = Number(raw);
  if (!Number.isFinite(m) || m <= 0 || m > 240) throw new Error(`soak minutes must be a number above 0 and at most 240, not "${raw}"`);
  return m;
}

const MINUTES = soakMinutes();
const LOAD_S = Math.round(MINUTES * 60);
const WORKERS: Instance[] = ['worker', 'worker#2'];
const INSTANCES: Instance[] = ['gateway', 'relay', ...WORKERS];
/** The invariant checks bind one parameter per execution (Postgres allows 65,535): 40/s × 20 min stays under. */
const MAX_RATE = 40;
const out = (line: string) => void process.stdout.write(`${line}\n`);

let pg: PrivatePostgres | undefined;
let rmq: PrivateRabbit | undefined;
let cluster: Cluster | undefined;

beforeAll(async () => {
  assertFreshBuild();
  pg = await PrivatePostgres.start();
  rmq = await PrivateRabbit.start();
  cluster = await Cluster.start({
    databaseServerUrl: pg.url,
    amqpUrl: rmq.url,
    env: { WORKER_CONCURRENCY: '4', STATE_METRICS_INTERVAL_MS: '2000', RATE_LIMIT_PER_MINUTE: '1000000' },
  });
  await cluster.start('worker#2');
}, 180_000);

afterAll(async () => {
  try {
    await cluster?.shutdown();
  } finally {
    await rmq?.destroy();
    await pg?.destroy();
  }
}, 120_000);

interface Faults {
  /** held: executions the killed worker had leased (running), left for the lease reaper. */
  kills: { instance: Instance; atS: number; exit: string; held: number; readyMs: number }[];
  broker?: { atS: number; stopMs: number; downMs: number; startMs: number; servicesReadyMs: number };
}

const sleepUntil = (t: number) => sleep(Math.max(0, t - Date.now()));

/** Waits until every accepted execution ended; gives up (with waitForEnd's list of open ones) after 2 minutes without progress. */
async function drain(c: Cluster, subs: Submission[]): Promise<{ ms: number; stuck?: string }> {
  const t = Date.now();
  let fewest = Infinity;
  let progressAt = Date.now();
  for (;;) {
    try {
      await waitForEnd(c.db, subs, false, 5_000);
      return { ms: Date.now() - t };
    } catch (err) {
      const open = Number((await c.db('executions').whereNotIn('status', TERMINAL).count({ n: '*' }).first())!.n);
      if (open < fewest) [fewest, progressAt] = [open, Date.now()];
      else if (Date.now() - progressAt > 120_000) return { ms: Date.now() - t, stuck: (err as Error).message };
    }
  }
}

/** The fault plan: a worker SIGKILLed and restarted every minute, the broker down 10 s once (mid-run, between two kills). */
async function runFaults(c: Cluster, sampler: Sampler): Promise<Faults> {
  const t0 = Date.now();
  const faults: Faults = { kills: [] };
  const plan: { atS: number; run: () => Promise<void> }[] = [];
  for (let m = 1; m * 60 < LOAD_S; m++) {
    const w = WORKERS[(m - 1) % WORKERS.length]!;
    plan.push({
      atS: m * 60,
      run: async () => {
        const pid = c.process(w)!.child.pid;
        const atS = sampler.elapsedS;
        const exit = await c.kill(w);
        const t = Date.now();
        // worker ids are wrk_<pid>_<random> (services/worker/src/engine.ts newWorkerId)
        const held = Number(
          (await c.db('executions').where({ status: 'running' }).andWhere('lease_owner', 'like', `wrk_${pid}\\_%`).count({ n: '*' }).first())!.n,
        );
        sampler.note(`SIGKILL ${w} (pid ${pid}, ${exit?.signal ?? exit?.code}): it held ${held} running executions`);
        await c.start(w, {}, 60_000);
        faults.kills.push({ instance: w, atS, exit: `${exit?.signal ?? exit?.code}`, held, readyMs: Date.now() - t });
        sampler.note(`${w} restarted, ready in ${Date.now() - t} ms`);
      },
    });
  }
  const brokerAt = Math.floor(LOAD_S / 120) * 60 + 25;
  if (brokerAt + 30 < LOAD_S) {
    plan.push({
      atS: brokerAt,
      run: async () => {
        const at = sampler.elapsedS;
        sampler.note('broker stopping');
        let t = Date.now();
        await rmq!.stop();
        const stopMs = Date.now() - t;
        sampler.note(`broker stopped (${stopMs} ms), down for 10 s`);
        await sleep(10_000);
        t = Date.now();
        await rmq!.start();
        const startMs = Date.now() - t;
        t = Date.now();
        await Promise.all(INSTANCES.map((i) => c.waitReady(i, 60_000)));
        faults.broker = { atS: at, stopMs, downMs: 10_000, startMs, servicesReadyMs: Date.now() - t };
        sampler.note(`broker started (${startMs} ms), every service ready ${faults.broker.servicesReadyMs} ms later`);
      },
    });
  }
  plan.sort((a, b) => a.atS - b.atS);
  for (const p of plan) {
    await sleepUntil(t0 + p.atS * 1_000);
    await p.run();
  }
  await sleepUntil(t0 + LOAD_S * 1_000);
  return faults;
}

it(
  `soak: ${MINUTES} min at half capacity, a worker killed every minute, the broker stopped once`,
  async () => {
    const c = cluster!;
    const started = Date.now();
    const client = new FaultClient(c.baseUrl);
    const workload = await Workload.create(c.db, client, { projects: 4, keysPerProject: 2, creditMicros: 100_000_000_000 });

    out(`\nsoak: probing capacity (2 workers × 4 slots, test.sleep 0–0.2 s × 1–3 steps)`);
    const probe = await probeCapacity(c.db, client, workload, { ks: [4, 8, 16, 32, 64], stageSeconds: 5, log: out });
    const rate = Math.min(MAX_RATE, Math.round((probe.perSecond / 2) * 10) / 10);
    expect(rate).toBeGreaterThan(0);
    out(`soak: capacity ${probe.perSecond}/s → ${rate} submits/s for ${MINUTES} min`);

    const stay: Record<'gateway' | 'relay', ServiceProcess> = { gateway: c.process('gateway')!, relay: c.process('relay')! };
    const load = new SteadyLoad(client, workload, rate);
    const sampler = new Sampler(c, load, INSTANCES, 10_000, out);
    await sampler.start();
    load.start();
    const subs = [...probe.subs];
    let faults: Faults;
    let drained: { ms: number; stuck?: string };
    let loadSamples: number; // samples taken while the load ran (memory growth compares those only)
    // the sampler's loops must stop whatever fails, or they outlive the database (a leaked handle)
    try {
      try {
        faults = await runFaults(c, sampler);
        loadSamples = sampler.samples.length;
      } finally {
        await load.stop(); // every submission has its answer (or the resend deadline passed)
      }
      sampler.note(`load stopped: ${load.subs.length} submissions`);
      subs.push(...load.subs);
      drained = await drain(c, subs);
      sampler.note(drained.stuck ? `STUCK, no execution ended for 2 min: ${drained.stuck}` : `drained in ${drained.ms} ms`);
    } finally {
      await sampler.stop();
    }
    const drainMs = drained.ms;

    // once everything ended, nothing may be left in the outbox (lag 0 within a few sweeps)
    let after = await sampler.sample();
    for (let i = 0; i < 10 && after.outboxLagMaxS > 0; i++) {
      await sleep(1_000);
      after = await sampler.sample();
    }
    const { problems, figures } = await checkInvariants(c.db, client, subs, {
      credits: workload.credits,
      allowedStatuses: [200, 202, 503],
      forbidErrorCodes: ['delivery_limit_exceeded'],
    });

    const samples = sampler.samples;
    const growth = memoryGrowth(samples.slice(0, loadSamples || samples.length), LOAD_S);
    const submit = submitFigures(load.answered);
    const e2e = await wholeRunE2e(c.db, 'soak-');
    const worst = windowWorst(samples);
    const logs = logDigest(c, ['gateway', 'relay', 'worker']);
    // work the kills made happen twice: executions claimed again, steps started again
    const reclaimed = Number((await c.db('executions').where('claims', '>', 1).count({ n: '*' }).first())!.n);
    const stepsRerun = Number((await c.db('execution_steps').where('attempts', '>', 1).count({ n: '*' }).first())!.n);
    const result = {
      minutes: MINUTES,
      capacityPerSecond: probe.perSecond,
      probeStages: probe.stages,
      ratePerSecond: rate,
      submitted: load.subs.length,
      ...figures,
      httpStatuses: client.statusSummary(),
      submitMs: submit,
      acceptToSucceededMs: e2e,
      worstWindow: worst,
      leaseExpiries: after.leaseExpiries,
      heldByKilledWorkers: faults.kills.reduce((n, k) => n + k.held, 0),
      executionsClaimedTwiceOrMore: reclaimed,
      stepsRerun,
      outboxLagAfterDrainS: after.outboxLagMaxS,
      drainMs,
      stuck: drained.stuck ?? null,
      kills: faults.kills.length,
      killRestartMs: faults.kills.map((k) => k.readyMs),
      broker: faults.broker ?? null,
      memory: growth,
      warnAndErrorLogs: logs,
      problems: problems.slice(0, 20),
      totalSeconds: Math.round((Date.now() - started) / 1000),
    };
    const f = (x: number | null | undefined, u = '') => (x === null || x === undefined ? '-' : `${x}${u}`);
    out(
      '\n' +
        table(`soak summary (${MINUTES} min)`, [
          ['capacity (probe)', `${probe.perSecond} executions/s (stages ${probe.stages.map((s) => `${s.outstanding}:${s.endedPerSecond}`).join(' ')})`],
          [
            'load',
            `${rate} submits/s, ${load.subs.length} submitted, ${load.subs.filter((x) => x.executionId).length} accepted (probe: ${probe.subs.length} more)`,
          ],
          ['ended', JSON.stringify(figures.byStatus)],
          ['HTTP statuses', JSON.stringify(client.statusSummary())],
          ['submit p50 / p99 / max', `${f(submit.p50Ms)} / ${f(submit.p99Ms)} / ${f(submit.maxMs)} ms`],
          ['accept→succeeded p50 / p99 / max', `${f(e2e.p50Ms)} / ${f(e2e.p99Ms)} / ${f(e2e.maxMs)} ms`],
          ['worst 10 s window p99', `submit ${f(worst.submitP99Ms)} ms, accept→succeeded ${f(worst.e2eP99Ms)} ms`],
          ['outbox lag max', `${f(worst.outboxLagS)} s (after the drain: ${after.outboxLagMaxS} s)`],
          ['queue depth max / open executions max', `${f(worst.queueDepth)} / ${f(worst.openExecutions)}`],
          ['lease expiries', `${f(after.leaseExpiries)} (executions claimed more than once: ${reclaimed}, steps rerun: ${stepsRerun})`],
          [
            'worker kills',
            `${faults.kills.length}, holding ${faults.kills.map((k) => k.held).join(', ')} running executions; restart ready in ${faults.kills.map((k) => k.readyMs).join(', ')} ms`,
          ],
          [
            'broker outage',
            faults.broker
              ? `at ${faults.broker.atS} s: stop ${faults.broker.stopMs} ms, 10 s down, start ${faults.broker.startMs} ms, services ready +${faults.broker.servicesReadyMs} ms`
              : 'none (run too short)',
          ],
          ['drain', drained.stuck ? `STUCK after ${drainMs} ms` : `${drainMs} ms`],
          ['invariants', problems.length === 0 ? 'all hold, audit ok' : `${problems.length} problems`],
        ]) +
        '\n' +
        growthTable(growth) +
        '\n' +
        table(
          'warn/error log lines',
          Object.entries(logs).flatMap(([s, counts]) => Object.entries(counts).map(([m, n]): [string, string] => [`${s}: ${m}`, String(n)])),
        ) +
        `\nSOAK_RESULT ${JSON.stringify(result)}\n`,
    );

    expect(problems).toEqual([]);
    expect(drained.stuck).toBeUndefined();
    expect(after.outboxLagMaxS).toBe(0);
    expect(faults.kills.length).toBe(Math.ceil(LOAD_S / 60) - 1);
    for (const k of faults.kills) expect(k.exit).toBe('SIGKILL');
    for (const s of ['gateway', 'relay'] as const) {
      expect(c.process(s)).toBe(stay[s]); // never died, never restarted
      expect(stay[s].exited).toBeUndefined();
    }
  },
  (LOAD_S + 20 * 60) * 1_000,
);
