/**
 * npm run bench [-- --quick]: the benchmark harness of issues 6 and 13 (see scripts/bench/README.md).
 * Every figure is printed next to a baseline measured in the same run on this machine.
 * Progress goes to stderr; the table and the final JSON line go to stdout.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { getExecutionSpec, measure, measurePgbench, quoteSpec, runVersus, startBaselines, submitSpec, type Baselines, type Measured } from './bench-http';
import { runB5, runPgBoss } from './e2e';
import { runHistoryComparison } from './history-bench';
import { unexpected } from './http-load';
import { CpuMeter } from './meter';
import { parseOptions } from './options';
import { PgbenchDb, pgbenchPath } from './pgbench';
import { pinServers, unpinServers } from './pin';
import { cleanUpOnSignal, killAllNow, setPinning, stopAll } from './procs';
import { runPush } from './push';
import { Report } from './report';
import { seedHot, seedSpread, submitBody, submitOneEach } from './seed';
import { ServiceStack } from './stack';

const say = (s: string) => process.stderr.write(`bench: ${s}\n`);

function ensurePgbench(): void {
  if (pgbenchPath()) return;
  // Debian ships pgbench in postgresql-client (and with the server); install it when we can.
  if (process.getuid?.() !== 0) throw new Error('pgbench is not installed: apt-get install postgresql-client');
  say('pgbench missing: apt-get install postgresql-client');
  execFileSync('sh', ['-c', 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql-client'], { stdio: 'inherit' });
  if (!pgbenchPath()) throw new Error('pgbench still missing after installing postgresql-client');
}

/** Warnings a benchmark causes on purpose: counted in a note, but not "unexpected" (the log folder is not kept for them). */
const EXPECTED_WARNINGS = new Map([['relay.webhook.retry', "expected: B9's receiver answers 500 for 10 s"]]);

/**
 * What the children logged at warn or above (the worker and relay run at LOG_LEVEL=warn; the
 * gateway at info, whose access-log and other info lines are skipped here): counted per level,
 * with the first few messages quoted; other stderr text too.
 */
function serviceLogNotes(logDir: string, report: Report): number {
  let total = 0;
  for (const file of readdirSync(logDir).filter((f) => /^(gateway|worker|relay|pgboss-\w+|hello-\w+)\.log$/.test(f))) {
    const levels = new Map<string, number>();
    const expected = new Map<string, number>();
    const samples: string[] = [];
    for (const line of readFileSync(path.join(logDir, file), 'utf8').split('\n')) {
      if (!line.trim()) continue;
      let level = 'stderr';
      let message = line;
      try {
        const rec = JSON.parse(line) as { level?: string; message?: string };
        level = rec.level ?? 'unknown';
        if (level === 'info' || level === 'debug') continue;
        message = `${rec.message ?? ''} ${line.slice(0, 200)}`;
        if (rec.message && EXPECTED_WARNINGS.has(rec.message)) {
          expected.set(rec.message, (expected.get(rec.message) ?? 0) + 1);
          continue;
        }
      } catch {
        // not a log record: a stack trace or a runtime warning
      }
      levels.set(level, (levels.get(level) ?? 0) + 1);
      if (samples.length < 3) samples.push(`${level}: ${message.slice(0, 240)}`);
      total += 1;
    }
    if (levels.size) report.note(`${file}: ${[...levels].map(([l, n]) => `${n} ${l}`).join(', ')}; first: ${samples.join(' | ')}`);
    for (const [m, n] of expected) report.note(`${file}: ${n} × ${m} (${EXPECTED_WARNINGS.get(m)})`);
  }
  return total;
}

async function main(): Promise<void> {
  const o = parseOptions(process.argv.slice(2));
  // the SDK's notice that its 2027 releases need Node 22 (known, see infrastructure notes)
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED = 'true';
  const t0 = Date.now();
  ensurePgbench();
  const logDir = mkdtempSync(path.join(os.tmpdir(), 'tes-bench-'));
  const meter = new CpuMeter();
  const report = new Report();
  const stack = new ServiceStack(logDir, o, o.cpuProf);
  const pgdb = new PgbenchDb(logDir);
  let baselines: Baselines | undefined;
  let failed = false;

  cleanUpOnSignal(say, async () => {
    if (o.taskset) unpinServers();
    await stopAll().catch(() => undefined);
    await stack.stop().catch(() => undefined);
    await pgdb.drop().catch(() => undefined);
  });
  process.on('exit', killAllNow);

  try {
    if (o.taskset) {
      say(
        `--taskset: PostgreSQL, RabbitMQ, the harness and its other children on CPUs ${o.taskset.stack}; gateway, hello worlds and floor on ${o.taskset.gateway}`,
      );
      setPinning(o.taskset);
      const note = pinServers(o.taskset.stack);
      if (note) report.note(note);
    }
    if (o.history) await runHistoryComparison(o, logDir, meter, report);
    else {
      say(`starting the stack (production mode, dist/) — logs in ${logDir}`);
      await stack.start();
      meter.label(stack.gateway.pid, 'gateway');
      meter.label(stack.relay.pid, 'relay');
      say(`seeding ${o.projects} projects and a hot project with ${o.hotKeys} keys`);
      const tenants = await seedSpread(stack.db, o.projects);
      const hot = await seedHot(stack.db, o.hotKeys);
      const body = await submitBody(stack.baseUrl, tenants[0]!.secret);
      await submitOneEach(stack.baseUrl, tenants, body);
      await pgdb.prepare(o.projects);

      if (['b1', 'b2', 'b3'].some((b) => o.only.has(b))) {
        baselines = await startBaselines(
          logDir,
          meter,
          {
            pollDatabaseUrl: stack.databaseUrl,
            submitDatabaseUrl: pgdb.url,
            submitProjects: o.projects,
            poolMax: o.pgbenchClients,
          },
          o.cpuProf,
        );
      }
      if (o.only.has('b1')) {
        say('B1: GET /tools/executions/{id} vs its floor (Express + node-postgres + one SELECT), Express 5 and node:http hello-world');
        const r = await runVersus('b1', getExecutionSpec(tenants), stack.baseUrl, baselines!, o, logDir, meter, true);
        versusRows(report, 'B1', 'GET /tools/executions/{id}', r, ['200'], 0.5);
        floorRows(report, 'B1', r.gateway, r.floor!, 0.8);
      }
      if (o.only.has('b2')) {
        say('B2: POST /tools/quote vs Express 5 and node:http hello-world');
        const r = await runVersus('b2', quoteSpec(tenants, body), stack.baseUrl, baselines!, o, logDir, meter);
        versusRows(report, 'B2', 'POST /tools/quote', r, ['200'], undefined);
      }
      let b3PerSec: number | undefined;
      let b5PerSec: number | undefined;
      const load = (spec: ReturnType<typeof submitSpec>) => ({
        ...spec,
        url: stack.baseUrl,
        connections: o.connections,
        warmupSec: o.warmupSec,
        durationSec: o.durationSec,
      });
      if (o.only.has('b3') || o.only.has('b4')) {
        say(`B3: accepted submits/s over ${o.projects} projects, then pgbench with the same transaction`);
        const r = await measure(load(submitSpec(tenants, body)), 'b3-submit', logDir, meter);
        let floor: Measured | undefined;
        if (baselines) {
          say('B3 floor: the same submits to Express + node-postgres running the submit statement');
          floor = await measure({ ...load(submitSpec(tenants, body)), url: baselines.floor.url }, 'b3-floor', logDir, meter);
        }
        const pgb = await measurePgbench(pgdb, o.projects, 'b3-pgbench', o, meter);
        b3PerSec = r.byStatus['202'] ? r.byStatus['202'] / r.durationSec : 0;
        const bad = unexpected(r, ['202', '429']);
        report.add({
          figure: `B3 accepted submits/s (${o.projects} projects)`,
          value: b3PerSec,
          unit: '/s',
          baseline: 'pgbench tx',
          baselineValue: pgb.tps,
          target: '≥ 0.5×',
          met: b3PerSec >= 0.5 * pgb.tps,
        });
        report.add({ figure: 'B3 submit p99', value: r.latencyMs.p99, unit: 'ms', baseline: 'pgbench avg', baselineValue: pgb.latencyAvgMs, ratio: null });
        report.add({ figure: 'B3 unexpected answers (429 allowed)', value: bad.count, unit: '', target: '= 0', met: bad.count === 0 });
        if (bad.count) report.note(`B3 unexpected answers: ${bad.detail}`);
        if (pgb.failed) report.note(`B3 pgbench: ${pgb.failed} failed transactions`);
        report.cpuOf('B3 gateway submits', r.cpu);
        report.cpuOf('B3 pgbench', pgb.cpu);
        report.figure('b3PerSec', b3PerSec);
        report.figure('b3P99Ms', r.latencyMs.p99);
        report.figure('b3PgbenchTps', pgb.tps);
        report.figure('b3RatioVsPgbench', b3PerSec / pgb.tps);
        report.figure('b3RateLimited', r.byStatus['429'] ?? 0);
        report.figure('b3UnexpectedErrors', bad.count);
        if (floor) floorRows(report, 'B3', { ...r, okPerSec: b3PerSec }, floor, 0.8, '202');
      }
      await baselines?.stop();
      baselines = undefined;
      if (o.only.has('b4')) {
        say(`B4: accepted submits/s all on one project (${o.hotKeys} keys), then pgbench on one hot row`);
        const r = await measure(load(submitSpec(hot, body)), 'b4-submit', logDir, meter);
        const pgb = await measurePgbench(pgdb, 1, 'b4-pgbench', o, meter);
        const b4 = r.byStatus['202'] ? r.byStatus['202'] / r.durationSec : 0;
        const bad = unexpected(r, ['202', '429']);
        report.add({
          figure: 'B4 accepted submits/s (1 project)',
          value: b4,
          unit: '/s',
          baseline: 'B3',
          baselineValue: b3PerSec,
          target: '≥ 0.5×',
          met: b4 >= 0.5 * (b3PerSec ?? Infinity),
        });
        report.add({ figure: 'B4 vs the same tx on 1 row', value: b4, unit: '/s', baseline: 'pgbench hot', baselineValue: pgb.tps });
        report.add({ figure: 'B4 submit p99', value: r.latencyMs.p99, unit: 'ms' });
        report.add({ figure: 'B4 unexpected answers (429 allowed)', value: bad.count, unit: '', target: '= 0', met: bad.count === 0 });
        if (bad.count) report.note(`B4 unexpected answers: ${bad.detail}`);
        report.cpuOf('B4 gateway submits', r.cpu);
        report.cpuOf('B4 pgbench hot row', pgb.cpu);
        report.figure('b4PerSec', b4);
        report.figure('b4P99Ms', r.latencyMs.p99);
        report.figure('b4RatioVsB3', b3PerSec ? b4 / b3PerSec : null);
        report.figure('b4PgbenchHotTps', pgb.tps);
        report.figure('b4RatioVsPgbenchHot', b4 / pgb.tps);
        report.figure('b4UnexpectedErrors', bad.count);
      }
      if (o.only.has('b5')) {
        say(`B5: end-to-end test.sleep executions/s (concurrency ${o.concurrency}), then at half that rate; B6: RSS`);
        const e = await runB5(stack, { ...submitSpec(tenants, body), url: stack.baseUrl }, o, logDir, meter);
        say('B5 baseline: pg-boss send → fetch → complete with the same concurrency');
        const boss = await runPgBoss(pgdb.url, o, logDir, meter);
        e2eRows(report, e, boss, o.concurrency);
        b5PerSec = e.perSec;
      }
      if (['b7', 'b8', 'b9'].some((b) => o.only.has(b))) {
        await runPush({ stack, tenants, body, o, logDir, meter, report, capacityPerSec: b5PerSec });
      }
    }
  } catch (err) {
    failed = true;
    report.note(`RUN FAILED: ${(err as Error).stack ?? String(err)}`);
  } finally {
    say('cleaning up: children, queues, databases, S3');
    await baselines?.stop().catch(() => undefined);
    await stack.stop().catch((err: unknown) => report.note((err as Error).message));
    await pgdb.drop().catch((err: unknown) => report.note(`pgbench database: ${(err as Error).message}`));
    await stopAll();
    if (o.taskset) unpinServers();
  }
  const logLines = serviceLogNotes(logDir, report);
  if (o.cpuProf) report.note(`CPU profiles (open in Chrome DevTools → Performance) in ${logDir}`);
  if (failed || logLines > 0 || o.cpuProf) report.note(`logs kept in ${logDir}`);
  else rmSync(logDir, { recursive: true, force: true });
  report.figure('quick', o.quick);
  report.figure('elapsedSec', (Date.now() - t0) / 1000);
  report.print([
    `Benchmarks (${o.quick ? 'quick' : 'full'}): ${os.cpus().length} cores, node ${process.version}, load average ${os
      .loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')} at the end`,
    `autocannon ${o.connections} connections, ${o.warmupSec} s warmup + ${o.durationSec} s measured per run; gateway ${o.gatewayProcesses} process(es) × DB_POOL_MAX ${o.gatewayPoolMax}; pgbench ${o.pgbenchClients} clients (= the gateway's connections); B5 concurrency ${o.concurrency}${
      o.taskset ? `; taskset: stack on CPUs ${o.taskset.stack}, gateway side on ${o.taskset.gateway}` : ''
    }`,
  ]);
  process.exitCode = failed ? 1 : 0;
  // Backstop: every handle should be closed by now; if one is not, say so rather than hang.
  setTimeout(() => {
    const handles = (process as unknown as { _getActiveHandles(): object[] })
      ._getActiveHandles()
      .filter((h) => h !== process.stdout && h !== process.stderr)
      .map((h) => `${h.constructor.name}${(h as { remotePort?: number }).remotePort ? `:${(h as { remotePort?: number }).remotePort}` : ''}`);
    say(`a handle kept the harness alive after the report (${handles.join(', ')}): exiting`);
    process.exit(process.exitCode ?? 0);
  }, 10_000).unref();
}

function versusRows(report: Report, id: string, what: string, r: Awaited<ReturnType<typeof runVersus>>, ok: string[], target: number | undefined): void {
  const rps = r.gateway.okPerSec;
  report.add({
    figure: `${id} ${what} req/s`,
    value: rps,
    unit: '/s',
    baseline: 'Express',
    baselineValue: r.express.okPerSec,
    ...(target ? { target: `≥ ${target}×`, met: rps >= target * r.express.okPerSec } : {}),
  });
  report.add({ figure: `${id} ${what} req/s`, value: rps, unit: '/s', baseline: 'node:http', baselineValue: r.node.okPerSec });
  report.add({ figure: `${id} p99`, value: r.gateway.latencyMs.p99, unit: 'ms', baseline: 'Express', baselineValue: r.express.latencyMs.p99 });
  for (const name of ['gateway', 'express', 'node'] as const) {
    const m = r[name];
    const bad = unexpected(m, ok);
    if (bad.count) report.note(`${id} ${name}: unexpected answers ${bad.detail}`);
    report.cpuOf(`${id} ${name}`, m.cpu);
  }
  const k = id.toLowerCase();
  report.figure(`${k}ReqPerSec`, rps);
  report.figure(`${k}P99Ms`, r.gateway.latencyMs.p99);
  report.figure(`${k}ExpressReqPerSec`, r.express.okPerSec);
  report.figure(`${k}NodeReqPerSec`, r.node.okPerSec);
  report.figure(`${k}RatioVsExpress`, rps / r.express.okPerSec);
  report.figure(`${k}RatioVsNode`, rps / r.node.okPerSec);
  report.figure(`${k}UnexpectedErrors`, unexpected(r.gateway, ok).count);
}

/** Gateway CPU per answered request, in ms of one core (100 % CPU = 1,000 ms per second). */
const cpuMsPer = (cpuPct: number | undefined, perSec: number): number | undefined => (cpuPct !== undefined && perSec > 0 ? (cpuPct * 10) / perSec : undefined);

/**
 * Our figure against the floor of our own stack (floor-child.ts) under the same load, and
 * where the CPU went per request: the gateway's and the floor's own, and PostgreSQL's (which
 * includes every other client of the shared server). What predicts scaling with cores.
 */
function floorRows(report: Report, id: string, ours: Measured, floor: Measured, target: number, status = '200'): void {
  const floorPerSec = (floor.byStatus[status] ?? 0) / floor.durationSec;
  const k = id.toLowerCase();
  report.add({
    figure: `${id} vs its floor (Express + pg, 1 statement)`,
    value: ours.okPerSec,
    unit: '/s',
    baseline: 'floor',
    baselineValue: floorPerSec,
    target: `≥ ${target}×`,
    met: ours.okPerSec >= target * floorPerSec,
  });
  const bad = unexpected(floor, [status]);
  if (bad.count) report.note(`${id} floor: unexpected answers ${bad.detail}`);
  report.cpuOf(`${id} floor`, floor.cpu);
  const gw = cpuMsPer(ours.cpu.gateway, ours.okPerSec);
  const fl = cpuMsPer(floor.cpu.floor, floorPerSec);
  const pgOurs = cpuMsPer(ours.cpu.postgres, ours.okPerSec);
  const pgFloor = cpuMsPer(floor.cpu.postgres, floorPerSec);
  report.add({ figure: `${id} CPU ms per request: gateway`, value: gw, unit: 'ms', baseline: 'floor', baselineValue: fl, ratio: null });
  report.add({ figure: `${id} CPU ms per request: postgres`, value: pgOurs, unit: 'ms', baseline: 'floor', baselineValue: pgFloor, ratio: null });
  report.figure(`${k}FloorPerSec`, floorPerSec);
  report.figure(`${k}RatioVsFloor`, ours.okPerSec / floorPerSec);
  report.figure(`${k}GatewayCpuMsPerReq`, gw);
  report.figure(`${k}FloorCpuMsPerReq`, fl);
  report.figure(`${k}PostgresCpuMsPerReq`, pgOurs);
}

function e2eRows(report: Report, e: Awaited<ReturnType<typeof runB5>>, boss: Awaited<ReturnType<typeof runPgBoss>>, concurrency: number): void {
  report.add({
    figure: `B5 test.sleep executions/s (c=${concurrency})`,
    value: e.perSec,
    unit: '/s',
    baseline: 'pg-boss',
    baselineValue: boss.perSec,
    target: '≥ 1.0×',
    met: e.perSec >= boss.perSec,
  });
  const h = e.half;
  report.add({
    figure: `B5 accept→running p99 @ ${h?.rate ?? '—'}/s`,
    value: h?.runP99,
    unit: 'ms',
    target: '≤ 50 ms',
    met: h ? h.runP99 <= 50 && h.unfinished === 0 : false,
  });
  report.add({ figure: 'B5 accept→running p50 @ half', value: h?.runP50, unit: 'ms' });
  report.add({ figure: 'B5 accept→confirmed p50 / p99', value: h?.pubP50, unit: 'ms', baseline: 'p99', baselineValue: h?.pubP99, ratio: null });
  report.add({ figure: 'B5 accept→succeeded p50 @ half', value: h?.doneP50, unit: 'ms' });
  report.add({ figure: 'B5 accept→succeeded p99 @ half', value: h?.doneP99, unit: 'ms' });
  report.add({ figure: 'B5 failed / needs_review executions', value: e.failed, unit: '', target: '= 0', met: e.failed === 0 });
  const rss = (n: string) => e.rss[n]?.peakMb;
  const limits: Record<string, number | undefined> = { gateway: 150, worker: 200, relay: undefined };
  for (const [name, limit] of Object.entries(limits)) {
    report.add({
      figure: `B6 ${name} RSS (peak under B5)`,
      value: rss(name),
      unit: 'MB',
      baseline: 'at start',
      baselineValue: e.startRss[name],
      ratio: null,
      ...(limit ? { target: `≤ ${limit} MB`, met: (rss(name) ?? Infinity) <= limit } : {}),
    });
  }
  report.cpuOf('B5 capacity', e.cpu);
  report.cpuOf('B5 half load', e.halfCpu);
  report.cpuOf('B5 pg-boss', boss.cpu);
  const bad = unexpected(e.load, ['202', '429']);
  if (bad.count) report.note(`B5 submits: unexpected answers ${bad.detail}`);
  if (e.stalePurged) report.note(`B5: dropped ${e.stalePurged} queued messages of B1-B4's submits (no worker ran then) before starting the worker`);
  if (e.backlogPurged) report.note(`B5: the capacity run's backlog did not drain in time; dropped ${e.backlogPurged} messages`);
  if (h?.unfinished) report.note(`B5 half load: ${h.unfinished} of ${h.n} executions unfinished after the drain limit`);
  if (h) {
    report.note(`B5 half load: ${h.n} executions measured, submitted at ${h.load.okPerSec.toFixed(1)}/s (asked ${h.rate}/s)`);
    const legs = Object.entries(h.legs).map(([k, [p50, p99]]) => `${k} ${p50.toFixed(1)}/${p99.toFixed(1)}`);
    report.note(
      `B5 half load legs, p50/p99 ms: accept→confirmed ${h.pubP50.toFixed(1)}/${h.pubP99.toFixed(1)}, ${legs.join(', ')} (tostep = claim→step start, step includes the S3 put, settle = step end→succeeded)`,
    );
  }
  report.note(`B5 pg-boss: ${boss.sent} sent, ${boss.completed} completed over warmup + measured run`);
  // CPU per unit of work, by process (everything the bench can attribute; "other" and the
  // kernel left out): which part of the pipeline costs what, less sensitive to noise than a rate
  const perUnit = (cpu: Record<string, number>, perSec: number, names: string[]) => {
    const parts = names.map((n) => [n, cpuMsPer(cpu[n] ?? 0, perSec) ?? 0] as const).filter(([, v]) => v > 0);
    return { total: parts.reduce((a, [, v]) => a + v, 0), text: parts.map(([n, v]) => `${n} ${v.toFixed(2)}`).join(', ') };
  };
  const ours = perUnit(e.cpu, e.perSec, ['gateway', 'worker', 'relay', 'postgres', 'rabbitmq', 'harness+s3', 'load']);
  const theirs = perUnit(boss.cpu, boss.perSec, ['pgboss-send', 'pgboss-work', 'postgres']);
  report.note(
    `B5 CPU ms per execution (capacity run): ${ours.total.toFixed(2)} (${ours.text}); pg-boss per job: ${theirs.total.toFixed(2)} (${theirs.text}); postgres includes every client of the shared server`,
  );
  report.figure('b5PerSec', e.perSec);
  report.figure('b5PgBossPerSec', boss.perSec);
  report.figure('b5RatioVsPgBoss', e.perSec / boss.perSec);
  report.figure('b5SubmitPerSec', e.load.okPerSec);
  report.figure('b5HalfLoadRate', h?.rate);
  report.figure('b5AcceptToConfirmedP50Ms', h?.pubP50);
  report.figure('b5AcceptToConfirmedP99Ms', h?.pubP99);
  report.figure('b5AcceptToRunningP50Ms', h?.runP50);
  report.figure('b5AcceptToRunningP99Ms', h?.runP99);
  report.figure('b5AcceptToSucceededP50Ms', h?.doneP50);
  report.figure('b5AcceptToSucceededP99Ms', h?.doneP99);
  report.figure('b5Failed', e.failed);
  report.figure('b5CpuMsPerExecution', ours.total);
  report.figure('b5PgBossCpuMsPerJob', theirs.total);
  report.figure('gatewayRssMb', rss('gateway'));
  report.figure('workerRssMb', rss('worker'));
  report.figure('relayRssMb', rss('relay'));
  report.figure('gatewayStartRssMb', e.startRss.gateway);
  report.figure('workerStartRssMb', e.startRss.worker);
}

void main();
