/**
 * `npm run bench -- --history=N` (issue #24): what months of history cost. The same runs twice,
 * on a stack of its own each: first on an empty database, then on one holding N executions of
 * history (seedHistory: each with its steps, artifact, upload one time in twenty, outbox row,
 * webhook delivery in one project in ten and five journal entries, over N / 1,000 projects,
 * spread over 30 days), seeded in SQL before any service starts, so the relay's start-up pass
 * and every cache start on the history as they would after a restart in production. Each run:
 * B1 (polls), B3 (submits) and B5 (end to end, with its half-load latencies) as the usual run
 * measures them, on the usual fresh tenants (`--projects`), then every service's peak RSS:
 * VmHWM (the kernel's high-water mark since the process started, so the relay's start-up audit
 * counts) of gateway and relay, and the worker's peak sampled during B5 (it runs only then).
 * Figure = seeded; baseline = empty; target ≥ 0.9× (issue #24) and RSS within 70 % of the
 * manifest's memory limit (30 % headroom).
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parseAllDocuments } from 'yaml';
import { loadConfig } from '@tes/config';
import { auditLedgerPass, deleteRetentionBatch, RETAINED_TABLES, settleExecution, type Db } from '@tes/db';
import { childPids, keptDatabase, seedHistory, type TestDatabase } from '@tes/testing';
import { getExecutionSpec, measure, submitSpec } from './bench-http';
import { runB5, type E2eResult } from './e2e';
import { rssMb, type CpuMeter } from './meter';
import { PeakWatch, type MemorySample } from './peak-watch';
import type { BenchOptions } from './options';
import type { Report } from './report';
import { seedSpread, submitBody, submitOneEach } from './seed';
import { ServiceStack } from './stack';
import { median } from './stats';

const say = (s: string) => process.stderr.write(`bench: ${s}\n`);
const ROOT = path.resolve(__dirname, '../../..');
const SERVICES = ['gateway', 'relay', 'worker'] as const;
type Service = (typeof SERVICES)[number];

interface Phase {
  history: number;
  seedSec: number;
  /** Cancelling what earlier runs left live in a kept database (cancelLeftovers). */
  leftoversSec?: number;
  b1: number | undefined;
  b1P99: number | undefined;
  b3: number | undefined;
  b3P99: number | undefined;
  b5: E2eResult | undefined;
  peakRssMb: Record<Service, number | undefined>;
  /** The highest RSS sampled after the start, per service, with when it happened and of what (PeakWatch). */
  peaks: Record<string, MemorySample>;
  relayStartSec: number;
  /** The incremental audit caught up with the seeded history (s), then one more pass (ms): the periodic pass at this history. */
  auditCatchUpSec?: number;
  auditPassMs?: number;
  retentionCatchUpSec?: number;
  /** All of catchUpAudit (the audit, retention, janitor, vacuums, the timed pass): preparation, not the relay's start. */
  catchUpSec?: number;
  /** Why the relay did not start with its manifest's heap cap, when it did not. */
  relayFailure?: string;
}

/** The heap the relay is given when it could not start with its manifest's (a measurement aid, not a setting). */
const RELAY_ROOM = '--max-old-space-size=4096';

/** The memory limit (MiB) of a service's container in deploy/k8s/base (the image worker's for the worker, as B6). */
function memoryLimitMb(name: Service): number | undefined {
  const file = path.join(ROOT, 'deploy/k8s/base', `${name === 'worker' ? 'worker-image' : name}.yaml`);
  for (const doc of parseAllDocuments(readFileSync(file, 'utf8'))) {
    const obj = doc.toJS() as { kind?: string; spec?: { template?: { spec?: { containers?: { resources?: { limits?: { memory?: string } } }[] } } } } | null;
    const raw = obj?.kind === 'Deployment' ? obj.spec?.template?.spec?.containers?.[0]?.resources?.limits?.memory : undefined;
    const m = raw === undefined ? null : /^(\d+)(Mi|Gi)$/.exec(raw);
    if (m) return Number(m[1]) * (m[2] === 'Gi' ? 1024 : 1); // MiB, as rssMb reports
  }
  return undefined;
}

/** Peak RSS (MB) of a process and its children since they started. */
const highWaterMb = (pid: number): number | undefined => {
  const each = [pid, ...childPids(pid)].map((p) => rssMb(p, 'VmHWM')).filter((v): v is number => v !== undefined);
  return each.length ? Math.max(...each) : undefined;
};

async function runPhase(o: BenchOptions, history: number, logDir: string, meter: CpuMeter, report: Report, round = 1): Promise<Phase> {
  const tag = `${history ? 'history' : 'empty'}${o.rounds > 1 ? `-r${round}` : ''}`;
  const stack = new ServiceStack(logDir, o);
  const phase: Phase = {
    history,
    seedSec: 0,
    b1: undefined,
    b1P99: undefined,
    b3: undefined,
    b3P99: undefined,
    b5: undefined,
    peakRssMb: { gateway: undefined, relay: undefined, worker: undefined },
    peaks: {},
    relayStartSec: 0,
  };
  let watch: PeakWatch | undefined;
  try {
    const kept = history && o.historyDb ? await keptDatabase(o.historyDb) : undefined;
    const started = Date.now();
    const starting = stack.start({
      readyTimeoutMs: 60_000,
      ...(kept ? { database: kept } : {}),
      prepare: async (db) => {
        if (!history) return;
        if (kept) {
          const { seeded, seeding } = await keptHistory(db, kept);
          if (seeded === history) {
            say(`using the ${history.toLocaleString('en-US')} executions of history kept in database ${kept.name}`);
            phase.leftoversSec = await cancelLeftovers(db); // preparation, not the relay's start
            await catchUpAudit(db, phase);
            if (o.seedOnly) throw new SeedOnly();
            return;
          }
          if (!kept.created && seeding !== history)
            throw new Error(
              `database ${kept.name} holds ${seeded ?? `an unfinished seed of ${seeding ?? '?'}`} executions of history, not ${history}: dropdb ${kept.name} and seed again`,
            );
          // said before the first batch, so a seed that is stopped can be continued (seedHistory resumes after its last batch)
          await db.raw(`COMMENT ON DATABASE "${kept.name}" IS 'tes history bench: seeding ${history} executions'`);
        }
        say(`seeding ${history.toLocaleString('en-US')} executions of history (steps, artifacts, uploads, outbox, webhooks, journal)`);
        const t = Date.now();
        let lastSaid = 0;
        const seededNow = await seedHistory(db, {
          executions: history,
          batch: 50_000,
          onProgress: (written, total, resumed) => {
            if (Date.now() - lastSaid < 10_000 && written < total) return;
            lastSaid = Date.now();
            const sec = (Date.now() - t) / 1000;
            say(
              `  history: ${written.toLocaleString('en-US')} / ${total.toLocaleString('en-US')} executions, ${sec.toFixed(0)} s (${((written - resumed) / sec).toFixed(0)}/s)`,
            );
          },
        });
        phase.seedSec = (Date.now() - t) / 1000;
        const resumedNote = seededNow.resumed > 0 ? ` (continued after ${seededNow.resumed.toLocaleString('en-US')} a stopped seed had written)` : '';
        say(`  history seeded and analyzed in ${phase.seedSec.toFixed(0)} s${resumedNote}`);
        if (kept) await db.raw(`COMMENT ON DATABASE "${kept.name}" IS 'tes history bench: ${history} executions'`);
        await catchUpAudit(db, phase);
        if (o.seedOnly) throw new SeedOnly();
      },
    });
    await starting.catch(async (err: unknown) => {
      // the relay audits the whole ledger in memory before it is ready: past some history it
      // dies of its heap cap. Said as a result; the run goes on with a relay given room, so the
      // other figures are still measured (and its peak RSS says how much it needed).
      const relay = (stack as Partial<Pick<ServiceStack, 'relay'>>).relay;
      if (!history || relay !== undefined || (stack as Partial<Pick<ServiceStack, 'gateway'>>).gateway === undefined) throw err;
      phase.relayFailure = ((err as Error).message.split('\n')[0] ?? '').slice(0, 200); // its log (the V8 report) is kept and noted
      say(`the relay did not start on the history (${phase.relayFailure}); starting it again with ${RELAY_ROOM}`);
      await stack.restartRelay({ NODE_OPTIONS: RELAY_ROOM });
    });
    phase.relayStartSec = (Date.now() - started) / 1000 - phase.seedSec - (phase.leftoversSec ?? 0) - (phase.catchUpSec ?? 0);
    meter.label(stack.gateway.pid, 'gateway');
    meter.label(stack.relay.pid, 'relay');
    watch = new PeakWatch({
      gateway: { pid: stack.gateway.pid, metricsUrl: stack.metricsUrl.gateway },
      relay: { pid: stack.relay.pid, metricsUrl: stack.metricsUrl.relay },
    });
    watch.start();
    const tenants = await seedSpread(stack.db, o.projects);
    const body = await submitBody(stack.baseUrl, tenants[0]!.secret);
    await submitOneEach(stack.baseUrl, tenants, body);
    const load = <T extends object>(spec: T) => ({
      ...spec,
      url: stack.baseUrl,
      connections: o.connections,
      warmupSec: o.warmupSec,
      durationSec: o.durationSec,
    });
    if (o.only.has('b1')) {
      say(`B1 (${tag}): GET /tools/executions/{id}`);
      watch.step('B1');
      const r = await measure(load(getExecutionSpec(tenants)), `b1-${tag}`, logDir, meter);
      [phase.b1, phase.b1P99] = [r.okPerSec, r.latencyMs.p99];
      report.cpuOf(`B1 ${tag}`, r.cpu);
    }
    if (o.only.has('b3')) {
      say(`B3 (${tag}): accepted submits/s over ${o.projects} projects`);
      watch.step('B3');
      const r = await measure(load(submitSpec(tenants, body)), `b3-${tag}`, logDir, meter);
      [phase.b3, phase.b3P99] = [(r.byStatus['202'] ?? 0) / r.durationSec, r.latencyMs.p99];
      report.cpuOf(`B3 ${tag}`, r.cpu);
    }
    if (o.only.has('b5')) {
      // B3 leaves its accepted submits queued (no worker runs then, and their messages are
      // purged): about 17,000 over 400 projects in a full run. The worker B5 starts would claim
      // them first (first in, first out per project, B5's tenants are B3's), so B5 would measure
      // that line's drain, not executions end to end, and its half-load latencies would read the
      // line. Cancelled on both sides alike, so B5 starts on an empty line, as a B5-only run does.
      watch.step("cancelling B3's line");
      const c = Date.now();
      const cancelled = await cancelLive(stack.db);
      if (cancelled > 0) say(`  ${cancelled.toLocaleString('en-US')} executions B3 left queued cancelled in ${((Date.now() - c) / 1000).toFixed(0)} s`);
      say(`B5 (${tag}): end-to-end test.sleep executions/s, then at half that rate`);
      watch.step('B5');
      phase.b5 = await runB5(stack, { ...submitSpec(tenants, body), url: stack.baseUrl }, o, logDir, meter);
      phase.peakRssMb.worker = phase.b5.rss.worker?.peakMb;
      report.cpuOf(`B5 ${tag}`, phase.b5.cpu);
    }
    phase.peakRssMb.gateway = highWaterMb(stack.gateway.pid);
    phase.peakRssMb.relay = highWaterMb(stack.relay.pid);
    phase.peaks = watch.stop();
    return phase;
  } finally {
    watch?.stop();
    say(`cleaning up the ${tag} stack`);
    await stack.stop();
  }
}

class SeedOnly extends Error {}

/**
 * What a kept database's comment says of its history: `seeded` when its seed finished, `seeding`
 * while one runs or after it was stopped (the executions it is for); neither when it has none.
 */
async function keptHistory(db: Db, database: TestDatabase): Promise<{ seeded?: number; seeding?: number }> {
  const r = await db.raw<{ rows: { c: string | null }[] }>(`SELECT shobj_description(oid, 'pg_database') AS c FROM pg_database WHERE datname = ?`, [
    database.name,
  ]);
  const m = /^tes history bench: (seeding )?(\d+) executions$/.exec(r.rows[0]?.c ?? '');
  if (!m) return {};
  return m[1] ? { seeding: Number(m[2]) } : { seeded: Number(m[2]) };
}

/**
 * The relay audits the ledger as it is written, so in production the incremental audit's cursor
 * follows the history; the seed writes it all at once, so the audit is brought up to date here,
 * before any service starts (else the relay's catch-up would run under the measurements). Then
 * one more pass: what a periodic pass costs at this history.
 */
/**
 * A kept database holds the line an earlier run left (B3's accepted submits nobody ran: about
 * 10,000 a run), which the empty database of this run does not: the fair pick costs a few index
 * probes per project with queued work, so B5 would compare a line of 400 projects with one of
 * 400 per earlier run. Each is cancelled as a caller's cancel settles it (nothing charged, its
 * reservation released, journalled), so the history phase starts with no line, as the empty
 * one does. The seed writes finished executions only: every live one is a leftover.
 */
async function cancelLeftovers(db: Db): Promise<number> {
  const t = Date.now();
  const cancelled = await cancelLive(db);
  if (cancelled > 0) say(`  ${cancelled.toLocaleString('en-US')} executions earlier runs left live cancelled in ${((Date.now() - t) / 1000).toFixed(0)} s`);
  // Earlier runs' churn (every execution they submitted, claimed and settled) stays in the
  // table as dead rows. A plain VACUUM is what autovacuum would have done meanwhile; at 10 M rows
  // it skips the indexes (under 2 % of the pages hold dead rows), and nothing of the line
  // depends on that any more: the line is execution_line, which the relay vacuums every minute
  // (migration 20261127000020; the manual VACUUM (INDEX_CLEANUP ON) this needed before is gone).
  const v = Date.now();
  await db.raw('VACUUM (ANALYZE) executions');
  say(`  executions vacuumed in ${((Date.now() - v) / 1000).toFixed(0)} s`);
  return (Date.now() - t) / 1000;
}

/**
 * The seed marks deleted what had expired when each batch was written, as the janitor would
 * have; the files and artifacts that expired since (the seed's hour, the time a database is
 * kept: the newest history's clock runs on) would meet the history side's relay as a backlog
 * of tens of thousands of deletes at once, where a janitor that ran all along deletes them as
 * they expire. Marked deleted the same way (expiry + 1 minute), through the expiry indexes.
 */
async function catchUpJanitor(db: Db): Promise<void> {
  const t = Date.now();
  let marked = 0;
  for (const table of ['files', 'artifacts'] as const) {
    const r = await db.raw<{ rowCount: number }>(
      `UPDATE ${table} SET deleted_at = expires_at + interval '1 minute' WHERE deleted_at IS NULL AND expires_at < now() - interval '1 minute'`,
    );
    marked += r.rowCount;
  }
  if (marked > 0)
    say(`  ${marked.toLocaleString('en-US')} files and artifacts expired since the seed marked deleted in ${((Date.now() - t) / 1000).toFixed(0)} s`);
}

/** Cancels every live execution as a caller's cancel settles it (nothing charged, its reservation released, journalled); returns how many. */
async function cancelLive(db: Db): Promise<number> {
  const live = await db.raw<{ rows: { id: string; project_id: string }[] }>(
    // the reaper's index (every live execution has a deadline): no walk of the history
    `SELECT id, project_id FROM executions WHERE status IN ('queued', 'running', 'waiting') AND lease_expires_at IS NOT NULL`,
  );
  let next = 0;
  const worker = async (): Promise<void> => {
    for (let i = next++; i < live.rows.length; i = next++) {
      const e = live.rows[i]!;
      await settleExecution(db, { executionId: e.id, projectId: e.project_id, status: 'cancelled', chargedMicros: 0, from: ['queued', 'running', 'waiting'] });
    }
  };
  await Promise.all(Array.from({ length: 8 }, worker));
  return live.rows.length;
}

async function catchUpAudit(db: Db, phase: Phase): Promise<void> {
  const t = Date.now();
  let rows = 0;
  for (;;) {
    const r = await auditLedgerPass(db, { maxRows: 1_000_000 });
    rows += r.ledgerEntries + r.checkedExecutions;
    if (r.ok === false) throw new Error(`the ledger audit found the seeded history broken: ${JSON.stringify(r.problems.slice(0, 3))}`);
    if (r.caughtUp) break;
    say(`  audit catching up: ${rows.toLocaleString('en-US')} rows, ${((Date.now() - t) / 1000).toFixed(0)} s`);
  }
  phase.auditCatchUpSec = (Date.now() - t) / 1000;
  // The same for retention: a live relay deletes rows as they pass their horizon; the seed writes
  // 30 days at once, so most of its outbox rows and webhook deliveries are past it, and the
  // relay's retention would delete them under the measurements (≈ 300,000 rows a run at 10 M)
  const r = Date.now();
  const horizons = loadConfig({}).retention; // the defaults the bench's relay runs with
  let deleted = 0;
  for (const table of RETAINED_TABLES) for (let n = -1; n !== 0; deleted += n) n = await deleteRetentionBatch(db, table, horizons, 10_000);
  phase.retentionCatchUpSec = (Date.now() - r) / 1000;
  say(`  retention caught up: ${deleted.toLocaleString('en-US')} rows past their horizon deleted in ${phase.retentionCatchUpSec.toFixed(0)} s`);
  await catchUpJanitor(db);
  // What autovacuum does while a live relay works (this cluster runs without it, as CI's): the
  // catch-up's passes left each project's audit totals rewritten hundreds of times (1.4 M dead
  // versions of 40,000 rows, 116 MB that the pass's per-project check reads) and retention 10 M
  // dead outbox and delivery rows. A table of 40,000 rows is compacted (autovacuum, running
  // every minute of the catch-up, would have kept it so); the others are vacuumed.
  const v = Date.now();
  await db.raw('VACUUM (FULL, ANALYZE) ledger_audit_totals');
  await db.raw('VACUUM (ANALYZE) outbox, webhook_deliveries');
  say(`  the catch-up's churn vacuumed in ${((Date.now() - v) / 1000).toFixed(0)} s`);
  const p = Date.now();
  await auditLedgerPass(db);
  phase.auditPassMs = Date.now() - p;
  say(`  audit caught up in ${phase.auditCatchUpSec.toFixed(0)} s; one more pass took ${phase.auditPassMs} ms`);
  phase.catchUpSec = (Date.now() - t) / 1000;
}

/** What the rows read of a phase, or of several (each figure's median; peak RSS: the highest). */
interface Figures {
  b1: number | undefined;
  b1P99: number | undefined;
  b3: number | undefined;
  b3P99: number | undefined;
  b5: number | undefined;
  b5DoneP99: number | undefined;
  peakRssMb: Record<Service, number | undefined>;
}

function figuresOf(phases: Phase[]): Figures {
  const m = (f: (p: Phase) => number | undefined) => median(phases.map(f));
  const highest = (name: Service) => {
    const each = phases.map((p) => p.peakRssMb[name]).filter((v): v is number => v !== undefined);
    return each.length ? Math.max(...each) : undefined;
  };
  return {
    b1: m((p) => p.b1),
    b1P99: m((p) => p.b1P99),
    b3: m((p) => p.b3),
    b3P99: m((p) => p.b3P99),
    b5: m((p) => p.b5?.perSec),
    b5DoneP99: m((p) => p.b5?.half?.doneP99),
    peakRssMb: { gateway: highest('gateway'), relay: highest('relay'), worker: highest('worker') },
  };
}

const ratioText = (a: number | undefined, b: number | undefined): string => (a !== undefined && b ? `${(a / b).toFixed(2)}×` : '—');

/**
 * Both phases, then their rows: the seeded figure next to the empty one. With --rounds=N, both N
 * times in alternating order, and each row is the median of its rounds (each round's ratios
 * are noted).
 */
export async function runHistoryComparison(o: BenchOptions, logDir: string, meter: CpuMeter, report: Report): Promise<void> {
  if (o.seedOnly) {
    await runPhase(o, o.history, logDir, meter, report).catch((err: unknown) => {
      if (!(err instanceof SeedOnly)) throw err;
    });
    say(`seeded; measure with: npm run bench -- --history=${o.history} --history-db=${o.historyDb}`);
    return;
  }
  const rounds: { empty: Phase; seeded: Phase; historyFirst: boolean }[] = [];
  for (let r = 1; r <= o.rounds; r++) {
    const historyFirst = o.historyFirst !== (r % 2 === 0);
    if (o.rounds > 1) say(`round ${r} of ${o.rounds}: ${historyFirst ? 'history' : 'empty'} first`);
    const first = await runPhase(o, historyFirst ? o.history : 0, logDir, meter, report, r);
    const second = await runPhase(o, historyFirst ? 0 : o.history, logDir, meter, report, r);
    rounds.push(historyFirst ? { empty: second, seeded: first, historyFirst } : { empty: first, seeded: second, historyFirst });
  }
  const empties = rounds.map((r) => r.empty);
  const seededs = rounds.map((r) => r.seeded);
  const empty = figuresOf(empties);
  const seeded = figuresOf(seededs);
  // the history as the first round's history phase found it (later rounds reuse a kept database)
  const history = seededs[0]!;
  if (o.rounds > 1) {
    for (const [i, r] of rounds.entries()) {
      const [e, h] = [figuresOf([r.empty]), figuresOf([r.seeded])];
      const ratios = (['b1', 'b3', 'b5'] as const).filter((b) => o.only.has(b)).map((b) => `${b.toUpperCase()} ${ratioText(h[b], e[b])}`);
      report.note(`round ${i + 1} (${r.historyFirst ? 'history' : 'empty'} first): ${ratios.join(', ')}`);
    }
  }
  const n = o.history.toLocaleString('en-US');
  const ratioRow = (figure: string, value: number | undefined, baseline: number | undefined, unit: string, higherIsBetter: boolean) =>
    report.add({
      figure: `${figure} (history ${n})${o.rounds > 1 ? `, median of ${o.rounds}` : ''}`,
      value,
      unit,
      baseline: 'empty',
      baselineValue: baseline,
      ...(higherIsBetter ? { target: '≥ 0.9×', met: value !== undefined && baseline !== undefined && value >= 0.9 * baseline } : { ratio: null }),
    });
  if (o.only.has('b1')) {
    ratioRow('B1 GET /tools/executions/{id} req/s', seeded.b1, empty.b1, '/s', true);
    ratioRow('B1 p99', seeded.b1P99, empty.b1P99, 'ms', false);
  }
  if (o.only.has('b3')) {
    ratioRow('B3 accepted submits/s', seeded.b3, empty.b3, '/s', true);
    ratioRow('B3 p99', seeded.b3P99, empty.b3P99, 'ms', false);
  }
  if (o.only.has('b5')) {
    ratioRow('B5 test.sleep executions/s', seeded.b5, empty.b5, '/s', true);
    ratioRow('B5 accept→succeeded p99 @ half', seeded.b5DoneP99, empty.b5DoneP99, 'ms', false);
  }
  for (const name of SERVICES) {
    const limit = memoryLimitMb(name);
    const value = seeded.peakRssMb[name];
    if (value === undefined && empty.peakRssMb[name] === undefined) continue; // the worker runs only for B5
    report.add({
      figure: `peak RSS ${name} (history ${n})`,
      value,
      unit: 'MB',
      baseline: 'empty',
      baselineValue: empty.peakRssMb[name],
      ratio: null,
      ...(limit ? { target: `≤ ${Math.round(0.7 * limit)} MB (70 % of ${Math.round(limit)})`, met: value !== undefined && value <= 0.7 * limit } : {}),
    });
  }
  const relayStart = (ps: Phase[]) => ps.map((p) => p.relayStartSec.toFixed(1)).join(', ');
  report.note(
    `history: ${n} executions seeded in ${history.seedSec.toFixed(0)} s; the relay took ${relayStart(seededs)} s to start on it (empty: ${relayStart(empties)} s, both include the gateway's start)`,
  );
  const relayFailure = seededs.find((p) => p.relayFailure)?.relayFailure;
  if (relayFailure)
    report.note(
      `the relay did NOT start on ${n} executions of history with its manifest's NODE_OPTIONS (${relayFailure}); it was started again with ${RELAY_ROOM} to measure the rest, so its peak RSS is what it needed`,
    );
  report.figure('historyRelayStartFailed', relayFailure !== undefined);
  for (const [p, tag] of rounds.flatMap((r, i) => {
    const suffix = o.rounds > 1 ? ` r${i + 1}` : '';
    return [
      [r.empty, `empty${suffix}`],
      [r.seeded, `history${suffix}`],
    ] as const;
  })) {
    if (p.b5?.failed) report.note(`B5 (${tag}): ${p.b5.failed} failed or needs_review executions`);
    if (p.b5?.backlogPurged) report.note(`B5 (${tag}): the capacity run's backlog did not drain in time; dropped ${p.b5.backlogPurged} messages`);
    for (const [name, peak] of Object.entries(p.peaks)) {
      const v8 =
        peak.heapUsedMb === undefined
          ? ''
          : `, V8 heap ${peak.heapUsedMb.toFixed(0)} MB used of ${peak.heapTotalMb?.toFixed(0) ?? '?'} MB held, external ${peak.externalMb?.toFixed(0) ?? '?'} MB`;
      report.note(`${name} (${tag}): highest sampled RSS ${peak.rssMb.toFixed(0)} MB during ${peak.during} (anonymous ${peak.anonMb.toFixed(0)} MB${v8})`);
    }
  }
  report.figure('historyExecutions', o.history);
  // the slowest pass and start of the rounds: each round's history phase runs one
  const auditPassMs = Math.max(...seededs.map((p) => p.auditPassMs ?? -Infinity));
  report.figure('historySeedSec', history.seedSec);
  report.figure('historyRelayStartSec', Math.max(...seededs.map((p) => p.relayStartSec)));
  report.figure('historyAuditCatchUpSec', history.auditCatchUpSec);
  report.figure('historyAuditPassMs', Number.isFinite(auditPassMs) ? auditPassMs : undefined);
  if (Number.isFinite(auditPassMs))
    report.add({
      figure: `periodic ledger audit pass (history ${n})${o.rounds > 1 ? `, slowest of ${o.rounds}` : ''}`,
      value: auditPassMs,
      unit: 'ms',
      target: '< 1000 ms',
      met: auditPassMs < 1000,
      ratio: null,
    });
  for (const [p, tag] of [
    [empty, 'Empty'],
    [seeded, 'History'],
  ] as const) {
    report.figure(`b1ReqPerSec${tag}`, p.b1);
    report.figure(`b1P99Ms${tag}`, p.b1P99);
    report.figure(`b3PerSec${tag}`, p.b3);
    report.figure(`b3P99Ms${tag}`, p.b3P99);
    report.figure(`b5PerSec${tag}`, p.b5);
    report.figure(`b5AcceptToSucceededP99Ms${tag}`, p.b5DoneP99);
    for (const name of SERVICES) report.figure(`${name}PeakRssMb${tag}`, p.peakRssMb[name]);
  }
  if (empty.b1 && seeded.b1) report.figure('b1RatioHistory', seeded.b1 / empty.b1);
  if (empty.b3 && seeded.b3) report.figure('b3RatioHistory', seeded.b3 / empty.b3);
  if (empty.b5 && seeded.b5) report.figure('b5RatioHistory', seeded.b5 / empty.b5);
  report.figure('historyRounds', o.rounds);
}
