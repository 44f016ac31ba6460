import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import type { Knex } from 'knex';
import { isAppError, newId, type ExecutionStatus } from '@tes/core';
import {
  abandonExecution, auditLedger, cancelExecution, claimExecution, createDb, creditBalance, enterWaiting, finishStep, getExecution, getSteps,
  markNeedsReview, MAX_REDISPATCH_MS, publishPrices, reapExpiredLeases, recordUpload, releaseLease, setMonthlyCap, settleExecution, startStep, submitExecution,
  sweepExpired, sweepOutbox,
} from '@tes/db';
import { createTestDatabase, seedProject, type TestDatabase } from '@tes/testing';

/*
 * Model-based test of the money and work SQL (libs/db/src/executions/, outbox.ts, janitor.ts,
 * files.ts, accounts.ts): random command sequences run against the real repository functions on
 * a real database and against a small in-memory model; after every command the balances, the
 * month's cap counter and usage, statuses, charges, leases and their deadlines, claims and
 * attempts, steps, outbox rows and deleted uploads must agree, and auditLedger must be ok.
 *
 * The database's clock is the model's: tes_now() is redefined to a frozen instant that only the
 * advanceClock command moves, starting five minutes before a UTC month ends, so deadlines,
 * expiries and the month of the cap are exact and a month boundary is crossed in most runs.
 *
 * After each sequence, liveness: every message in flight is lost (a purged broker), then time
 * passes in steps and the relay's passes run, with a worker that finishes whatever it is handed.
 * Every accepted execution must end (terminal, or needs_review for an operator).
 *
 * A failure shrinks and fast-check prints `seed`, `path` and the counterexample's replayPath;
 * replay it with LEDGER_MODEL_SEED=<seed> LEDGER_MODEL_PATH=<path> LEDGER_MODEL_REPLAY=<replayPath>.
 */

interface MStep { status: 'running' | 'succeeded' | 'failed'; cost: number; external: boolean; attempts: number }
interface MExec {
  id: string; project: number; key: string; status: ExecutionStatus; reserved: number; charged: number; cancelRequested: boolean;
  owner: string | null; deadline: number | null; attempts: number; claims: number; createdAt: number; steps: MStep[];
  outboxTotal: number; outboxUnsent: number; files: string[];
}
interface MFile { id: string; project: number; expiresAt: number; deleted: boolean }
interface MProject {
  available: number; reserved: number; capMonth: string | null; monthCharged: number; cap: number | null;
  usage: Map<string, { settled: number; settledCharge: number }>;
}
interface Model { projects: MProject[]; execs: MExec[]; files: MFile[]; seq: number; clock: number; prices: string[] }
interface Real { db: Knex; projectIds: string[]; keyIds: string[] }
type Cmd = fc.AsyncCommand<Model, Real>;

const MAX_ATTEMPTS = 2; // small, so the reaper's "exhausted" branch is reachable in short sequences
const INITIAL_CREDIT = 400_000;
/** Project 0 starts uncapped; 1 and 2 start with caps tight enough that reservations meet them. */
const INITIAL_CAPS = [null, 250_000, 500_000];
const MIN = 60_000;
/** Deadlines are odd multiples of 5 minutes and clock steps multiples of 10, so none is ever "now". */
const LEASE_TTL_MS = 65 * MIN;
const DISPATCH_MS = 25 * MIN;
const RECHECK_MS = 45 * MIN;
const REDISPATCH_MS = 15 * MIN;
/** The database's time at model time 0: five minutes before January ends (UTC). */
const EPOCH = Date.parse('2027-01-31T23:55:00.000Z');

let database: TestDatabase;
let db: Knex;
let commandsRun = 0;
/** How often each interesting outcome happened, printed at the end: a model that never reaches a branch proves nothing about it. */
const hits = new Map<string, number>();
const hit = (what: string) => hits.set(what, (hits.get(what) ?? 0) + 1);

beforeAll(async () => {
  database = await createTestDatabase();
  db = createDb({ url: database.url, poolMax: 4 });
});
afterAll(async () => {
  await db?.destroy();
  await database?.drop();
});

/** Sets the database's clock (tes_now()) to model time `t`, frozen there. */
async function setClock(t: number): Promise<void> {
  await db.raw(`CREATE OR REPLACE FUNCTION tes_now() RETURNS timestamptz LANGUAGE sql STABLE PARALLEL SAFE AS $$ SELECT timestamptz '${new Date(EPOCH + t).toISOString()}' $$`);
}
const monthOf = (t: number) => new Date(EPOCH + t).toISOString().slice(0, 8) + '01';

// ---- the model's rules (api-contract.md "Money rules", "States and moves") ----
const isOpenForWork = (e: MExec) => e.status === 'queued' || e.status === 'running' || e.status === 'waiting';
const succeededCost = (e: MExec) => e.steps.filter((s) => s.status === 'succeeded').reduce((a, s) => a + s.cost, 0);
const isPast = (m: Model, deadline: number | null) => deadline !== null && deadline < m.clock;
const claimable = (m: Model, e: MExec) => isOpenForWork(e) && (e.owner === null || isPast(m, e.deadline));
/** This month's charges as the cap sees them: the counter counts only while its month is the database's. */
const monthCharged = (m: Model, p: MProject) => (p.capMonth !== null && p.capMonth >= monthOf(m.clock) ? p.monthCharged : 0);

function settle(m: Model, e: MExec, status: ExecutionStatus, charge: number): number {
  const p = m.projects[e.project]!;
  const month = monthOf(m.clock);
  e.charged = Math.min(charge, e.reserved);
  e.status = status;
  e.owner = null;
  e.deadline = null;
  p.reserved -= e.reserved;
  p.available += e.reserved - e.charged;
  p.monthCharged = monthCharged(m, p) + e.charged;
  p.capMonth = p.capMonth !== null && p.capMonth > month ? p.capMonth : month;
  const u = p.usage.get(month) ?? { settled: 0, settledCharge: 0 };
  p.usage.set(month, { settled: u.settled + 1, settledCharge: u.settledCharge + e.charged });
  return e.charged;
}

/** abandonExecution's rule: an external step with no outcome may have cost money -> needs_review. */
function abandon(m: Model, e: MExec): 'failed' | 'needs_review' | 'not_abandoned' {
  if (!(e.status === 'queued' || e.status === 'running') || !(e.owner === null || isPast(m, e.deadline))) return 'not_abandoned';
  if (e.steps.some((s) => s.status === 'running' && s.external)) {
    Object.assign(e, { status: 'needs_review', owner: null, deadline: null });
    return 'needs_review';
  }
  settle(m, e, 'failed', succeededCost(e));
  return 'failed';
}

// ---- comparison with the database after every command ----
async function compare(m: Model, r: Real): Promise<void> {
  commandsRun += 1;
  const month = monthOf(m.clock);
  const projects = await db('projects as p')
    .leftJoin('usage_counters as u', function () { this.on('u.project_id', 'p.id').andOn('u.month', db.raw('tes_month()')); })
    .whereIn('p.id', r.projectIds)
    .select('p.id', 'p.available_micros', 'p.reserved_micros', 'p.monthly_cap_micros', 'u.execution_count', 'u.charged_micros',
      db.raw('CASE WHEN p.cap_month >= tes_month() THEN p.month_charged_micros ELSE 0 END AS month_charged'));
  const byId = new Map(projects.map((p) => [p.id as string, p]));
  expect(r.projectIds.map((id) => {
    const p = byId.get(id)!;
    return { available: p.available_micros, reserved: p.reserved_micros, monthCharged: p.month_charged, cap: p.monthly_cap_micros,
      settled: p.execution_count ?? 0, settledCharge: p.charged_micros ?? 0 };
  })).toEqual(m.projects.map((p) => ({ available: p.available, reserved: p.reserved, monthCharged: monthCharged(m, p), cap: p.cap,
    settled: p.usage.get(month)?.settled ?? 0, settledCharge: p.usage.get(month)?.settledCharge ?? 0 })));

  const execs = await db.raw<{ rows: Record<string, unknown>[] }>(
    `SELECT e.id, e.status, e.reserved_micros, e.charged_micros, e.cancel_requested, e.lease_owner, e.attempts, e.claims,
            (extract(epoch FROM e.lease_expires_at) * 1000)::bigint - ?::bigint AS deadline,
            (SELECT coalesce(json_agg(json_build_object('status', s.status, 'cost', s.cost_micros, 'external', s.external,
                     'attempts', s.attempts) ORDER BY s.index), '[]'::json) FROM execution_steps s WHERE s.execution_id = e.id) AS steps,
            (SELECT count(*)::int FROM outbox o WHERE o.execution_id = e.id) AS outbox_total,
            (SELECT count(*)::int FROM outbox o WHERE o.execution_id = e.id AND o.published_at IS NULL) AS outbox_unsent,
            (SELECT coalesce(array_agg(f.file_id ORDER BY f.file_id), '{}') FROM execution_files f WHERE f.execution_id = e.id) AS files
       FROM executions e WHERE e.project_id = ANY(?::text[]) ORDER BY e.id`, [EPOCH, r.projectIds] as unknown as Knex.RawBinding[]);
  expect(execs.rows.map((e) => ({
    id: e.id, status: e.status, reserved: e.reserved_micros, charged: e.charged_micros, cancelRequested: e.cancel_requested,
    owner: e.lease_owner, deadline: e.deadline === null ? null : Number(e.deadline), attempts: e.attempts, claims: e.claims, steps: e.steps,
    outboxTotal: e.outbox_total, outboxUnsent: e.outbox_unsent, files: e.files,
  }))).toEqual([...m.execs].sort((a, b) => (a.id < b.id ? -1 : 1)).map(({ project: _p, key: _k, createdAt: _c, files, ...rest }) =>
    ({ ...rest, files: [...new Set(files)].sort() })));

  const files = await db('files').whereIn('project_id', r.projectIds).select('id', 'deleted_at').orderBy('id');
  expect(files.map((f) => ({ id: f.id, deleted: f.deleted_at !== null })))
    .toEqual([...m.files].sort((a, b) => (a.id < b.id ? -1 : 1)).map((f) => ({ id: f.id, deleted: f.deleted })));

  // Runs share the database: only this run's projects (and project-less problems) count, so a
  // run that broke the ledger does not make every later, shrunk run fail with it.
  const audit = await auditLedger(db);
  const problems = audit.problems.filter((p) => p.projectId === undefined || r.projectIds.includes(p.projectId));
  if (problems.length > 0) throw new Error(`auditLedger: ${JSON.stringify(problems.slice(0, 5))}`);
}

// ---- commands ----
/**
 * Picks an execution: usually one the command can act on (so sequences get deep into the
 * state machine), sometimes any at all (so the fences are tried on every state).
 */
function pickExec(m: Model, pick: number, preferOpen: boolean, fits: (e: MExec) => boolean = isOpenForWork): MExec {
  const fitting = m.execs.filter(fits);
  const pool = preferOpen && fitting.length > 0 ? fitting : m.execs;
  return pool[pick % pool.length]!;
}
const isRunning = (e: MExec) => e.status === 'running';
const hasExec = (m: Readonly<Model>) => m.execs.length > 0;
const fenceOwner = (e: MExec, fence: 'current' | 'zombie') => (fence === 'current' ? (e.owner ?? 'nobody') : 'zombie-worker');

function command(label: string, check: (m: Readonly<Model>) => boolean, body: (m: Model, r: Real) => Promise<void>): Cmd {
  return { check, toString: () => label, run: async (m, r) => { await body(m, r); await compare(m, r); } };
}

const project = fc.nat({ max: 2 });
const execPick = fc.record({ pick: fc.nat(), preferOpen: fc.constantFrom(true, true, true, false) });
const fence = fc.constantFrom<'current' | 'zombie'>('current', 'current', 'current', 'zombie');

const creditCmd = fc.record({ project, micros: fc.integer({ min: 1, max: 400_000 }), again: fc.boolean() }).map(({ project: i, micros, again }) =>
  command(`credit(p${i}, ${micros}${again ? ', retried' : ''})`, () => true, async (m, r) => {
    const reference = `model-${(m.seq += 1)}`;
    await creditBalance(r.db, { projectId: r.projectIds[i]!, micros, reference });
    // A retried credit (same reference) is a no-op.
    if (again) expect(await creditBalance(r.db, { projectId: r.projectIds[i]!, micros, reference })).toMatchObject({ replayed: true });
    m.projects[i]!.available += micros;
  }));

const capCmd = fc.record({ project, cap: fc.option(fc.integer({ min: 0, max: 400_000 }), { freq: 3 }) }).map(({ project: i, cap }) =>
  command(`setMonthlyCap(p${i}, ${cap})`, () => true, async (m, r) => {
    await setMonthlyCap(r.db, r.projectIds[i]!, cap);
    m.projects[i]!.cap = cap;
  }));

/** An operator publishes new prices: submits quoted under the old ones are refused, nothing reserved. */
const pricesCmd = fc.constant(null).map(() =>
  command('publishPrices()', () => true, async (m, r) => {
    m.prices.push((await publishPrices(r.db, { model: (m.seq += 1), run: randomBytes(4).toString('hex') })).priceVersion);
  }));

/** Time passes on the database's clock: leases, deadlines and uploads expire; months end. */
const clockCmd = fc.record({ step: fc.constantFrom(10 * MIN, 20 * MIN, 70 * MIN, 35 * 24 * 60 * MIN), relay: fc.boolean() }).map(({ step, relay }) =>
  command(`advanceClock(${step / MIN} min${relay ? ', then relayTick and janitor' : ''})`, () => true, async (m, r) => {
    m.clock += step;
    await setClock(m.clock);
    if (!relay) return;
    await relayTick(m, r);
    await janitor(m, r);
  }));

/**
 * A worker that gets an execution through to the end: claim, one step that costs `cost`,
 * settle (or cancelled, when a cancel was accepted before the step). Deep paths, often.
 */
const workCmd = fc.record({ pick: fc.nat(), cost: fc.integer({ min: 0, max: 150_000 }) }).map(({ pick, cost }) =>
  command(`work(#${pick}, ${cost})`, (m) => m.execs.some((e) => claimable(m as Model, e)), async (m, r) => {
    const e = pickExec(m, pick, true, (x) => claimable(m, x));
    const owner = `worker-${(m.seq += 1)}`;
    const got = await claimExecution(r.db, e.id, owner, LEASE_TTL_MS);
    expect(got?.firstClaim).toBe(e.claims === 0);
    Object.assign(e, { status: 'running', owner, deadline: m.clock + LEASE_TTL_MS, claims: e.claims + 1 });
    const at = e.steps.findIndex((s) => s.status !== 'succeeded');
    const index = at === -1 ? e.steps.length : at;
    const projectId = r.projectIds[e.project]!;
    const started = await startStep(r.db, { executionId: e.id, projectId, index, name: `s${index}`, owner });
    expect(started).toBe(e.cancelRequested ? 'cancel_requested' : 'started');
    if (started === 'started') {
      expect(await finishStep(r.db, { executionId: e.id, projectId, index, owner, status: 'succeeded', costMicros: cost })).toBe(true);
      const step = e.steps[index];
      if (step) Object.assign(step, { status: 'succeeded', cost, attempts: step.attempts + 1 });
      else e.steps.push({ status: 'succeeded', cost, external: false, attempts: 1 });
    }
    const status = started === 'started' ? 'succeeded' : 'cancelled';
    const settled = await settleExecution(r.db, { executionId: e.id, projectId, status, chargedMicros: succeededCost(e), from: ['running'], leaseOwner: owner });
    expect(settled?.chargedMicros).toBe(settle(m, e, status, succeededCost(e)));
    hit(`work:${status}`);
  }));

const uploadCmd = fc.record({ project, retention: fc.constantFrom(25 * MIN, 45 * MIN, 30 * 24 * 60 * MIN) }).map(({ project: i, retention }) =>
  command(`upload(p${i}, ${retention / MIN} min)`, () => true, async (m, r) => {
    const sha = randomBytes(32).toString('hex');
    const { file } = await recordUpload(r.db, { projectId: r.projectIds[i]!, sha256: sha, format: 'png', mimeType: 'image/png', sizeBytes: 1, storageKey: `k/${sha}`, retentionMs: retention });
    m.files.push({ id: file.id, project: i, expiresAt: m.clock + retention, deleted: false });
  }));

const submitCmd = fc.record({
  project,
  reserve: fc.oneof({ weight: 1, arbitrary: fc.constant(0) }, { weight: 5, arbitrary: fc.integer({ min: 1, max: 250_000 }) }),
  repeat: fc.option(fc.nat(), { freq: 4 }),
  files: fc.oneof(fc.constant<number[]>([]), fc.array(fc.nat(), { minLength: 1, maxLength: 2 })),
  liveFiles: fc.constantFrom(true, true, true, false),
  stalePrice: fc.constantFrom(false, false, false, false, true),
}).map(({ project: i, reserve, repeat, files: filePicks, liveFiles, stalePrice }) =>
  command(`submit(p${i}, ${reserve}${repeat === null ? '' : `, repeat #${repeat}`}, files ${JSON.stringify(filePicks)}${stalePrice ? ', quoted under the first prices' : ''})`, () => true, async (m, r) => {
    const priceVersion = stalePrice ? m.prices[0]! : m.prices[m.prices.length - 1]!;
    const mine = m.execs.filter((e) => e.project === i);
    const original = repeat !== null && mine.length > 0 ? mine[repeat % mine.length]! : undefined;
    const key = original?.key ?? `key-${(m.seq += 1)}`;
    const p = m.projects[i]!;
    const live = m.files.filter((f) => f.project === i && !f.deleted && f.expiresAt > m.clock);
    const myFiles = liveFiles && live.length > 0 ? live : m.files.filter((f) => f.project === i);
    const files = myFiles.length > 0 ? filePicks.map((n) => myFiles[n % myFiles.length]!) : [];
    // Prediction: a bound key returns its execution untouched; else every file must be live, then balance, then cap.
    const expected = original ? 'existing'
      : files.some((f) => f.deleted || f.expiresAt <= m.clock) ? 'file_not_found'
      : priceVersion !== m.prices[m.prices.length - 1] ? 'price_version_mismatch'
      : p.available < reserve ? 'insufficient_balance'
      : p.cap !== null && monthCharged(m, p) + p.reserved + reserve > p.cap ? 'monthly_cap_exceeded' : 'created';
    const id = newId('exe');
    let outcome: string;
    let gotId: string | undefined;
    try {
      const res = await submitExecution(r.db, {
        id, projectId: r.projectIds[i]!, apiKeyId: r.keyIds[i]!, tool: 'test.sleep', model: 'default', category: 'test', arguments: { n: m.seq },
        priceVersion, totalSteps: 3, reservedMicros: reserve, idempotencyKey: key, requestDigest: 'digest',
        fileIds: files.map((f) => f.id), dispatchDeadlineMs: DISPATCH_MS,
      });
      outcome = res.kind;
      gotId = res.execution.id;
    } catch (err) {
      if (!isAppError(err)) throw err;
      outcome = err.code;
    }
    hit(`submit:${outcome}`);
    expect({ outcome, id: gotId }).toEqual({ outcome: expected, id: expected === 'existing' ? original!.id : expected === 'created' ? id : undefined });
    if (expected !== 'created') return;
    p.available -= reserve;
    p.reserved += reserve;
    m.execs.push({ id, project: i, key, status: 'queued', reserved: reserve, charged: 0, cancelRequested: false, owner: null,
      deadline: m.clock + DISPATCH_MS, attempts: 0, claims: 0, createdAt: m.clock, steps: [], outboxTotal: 1, outboxUnsent: 1,
      files: files.map((f) => f.id) });
  }));

const claimCmd = execPick.map(({ pick, preferOpen }) =>
  command(`claim(#${pick}${preferOpen ? '' : ', any'})`, hasExec, async (m, r) => {
    const e = pickExec(m, pick, preferOpen, (x) => claimable(m, x));
    const owner = `worker-${(m.seq += 1)}`;
    const expected = claimable(m, e);
    const got = await claimExecution(r.db, e.id, owner, LEASE_TTL_MS);
    expect(got === null ? null : got.firstClaim).toBe(expected ? e.claims === 0 : null);
    hit(`claim:${expected ? e.status : 'refused'}`);
    if (!expected) return;
    Object.assign(e, { status: 'running', owner, deadline: m.clock + LEASE_TTL_MS, claims: e.claims + 1 });
  }));

/** A worker hands its execution back (graceful shutdown, a database outage): no attempt is spent. */
const releaseCmd = fc.record({ x: execPick, fence }).map(({ x, fence: f }) =>
  command(`releaseLease(#${x.pick}, ${f})`, hasExec, async (m, r) => {
    const e = pickExec(m, x.pick, x.preferOpen, (y) => isRunning(y) && y.owner !== null);
    const owner = fenceOwner(e, f);
    const expected = e.status === 'running' && e.owner === owner;
    expect(await releaseLease(r.db, e.id, owner, RECHECK_MS)).toBe(expected);
    hit(`release:${expected}`);
    if (expected) Object.assign(e, { owner: null, deadline: m.clock + RECHECK_MS });
  }));

const startStepCmd = fc.record({ x: execPick, fence, external: fc.boolean() }).map(({ x, fence: f, external }) =>
  command(`startStep(#${x.pick}, ${f}, external=${external})`, hasExec, async (m, r) => {
    const e = pickExec(m, x.pick, x.preferOpen, isRunning);
    // The engine resumes at the first step that has not succeeded (a restart keeps the row's cost and external flag).
    const index = e.steps.findIndex((s) => s.status !== 'succeeded');
    const at = index === -1 ? e.steps.length : index;
    const owner = fenceOwner(e, f);
    const held = e.status === 'running' && e.owner === owner;
    // No new step starts once a cancel was accepted, whenever it landed.
    const expected = !held ? 'lease_lost' : e.cancelRequested ? 'cancel_requested' : 'started';
    const got = await startStep(r.db, { executionId: e.id, projectId: r.projectIds[e.project]!, index: at, name: `s${at}`, owner, external });
    expect(got).toBe(expected);
    hit(`startStep:${expected}`);
    if (expected !== 'started') return;
    const step = e.steps[at];
    if (step) Object.assign(step, { status: 'running', attempts: step.attempts + 1 });
    else e.steps.push({ status: 'running', cost: 0, external, attempts: 1 });
  }));

const finishStepCmd = fc.record({ x: execPick, fence, ok: fc.boolean(), cost: fc.integer({ min: 0, max: 120_000 }) }).map(({ x, fence: f, ok, cost }) =>
  command(`finishStep(#${x.pick}, ${f}, ${ok ? 'succeeded' : 'failed'}, ${cost})`, hasExec, async (m, r) => {
    const e = pickExec(m, x.pick, x.preferOpen, isRunning);
    const index = Math.max(0, e.steps.length - 1);
    const owner = fenceOwner(e, f);
    const expected = e.status === 'running' && e.owner === owner && e.steps[index]?.status === 'running';
    const got = await finishStep(r.db, { executionId: e.id, projectId: r.projectIds[e.project]!, index, owner, status: ok ? 'succeeded' : 'failed', costMicros: cost });
    expect(got).toBe(expected);
    if (expected) Object.assign(e.steps[index]!, { status: ok ? 'succeeded' : 'failed', cost });
  }));

const settleCmd = fc.record({ x: execPick, fence, status: fc.constantFrom<'succeeded' | 'failed' | 'cancelled'>('succeeded', 'failed', 'cancelled'), extra: fc.oneof(fc.constant(0), fc.nat({ max: 500_000 })) })
  .map(({ x, fence: f, status, extra }) =>
    command(`settle(#${x.pick}, ${f}, ${status}, +${extra})`, hasExec, async (m, r) => {
      const e = pickExec(m, x.pick, x.preferOpen, isRunning);
      const owner = fenceOwner(e, f);
      const charge = succeededCost(e) + extra; // extra: a buggy worker over-reporting; settle caps at the reservation
      const expected = e.status === 'running' && e.owner === owner;
      const got = await settleExecution(r.db, { executionId: e.id, projectId: r.projectIds[e.project]!, status, chargedMicros: charge, from: ['running'], leaseOwner: owner });
      const predicted = expected ? settle(m, e, status, charge) : null;
      hit(expected ? (charge > e.reserved ? 'settle:capped' : 'settle:applied') : 'settle:fenced');
      expect(got?.chargedMicros ?? null).toBe(predicted);
    }));

const cancelCmd = execPick.map(({ pick, preferOpen }) =>
  command(`cancel(#${pick})`, hasExec, async (m, r) => {
    const e = pickExec(m, pick, preferOpen);
    const record = (await getExecution(r.db, r.projectIds[e.project]!, e.id))!;
    const got = await cancelExecution(r.db, r.projectIds[e.project]!, record);
    let expected: string;
    if (e.status === 'queued') {
      expected = 'cancelled';
      settle(m, e, 'cancelled', 0);
      e.cancelRequested = true;
    } else if (e.status === 'running' || e.status === 'waiting') {
      expected = 'requested';
      e.cancelRequested = true;
    } else expected = e.status === 'cancelled' ? 'unchanged' : 'not_cancellable';
    expect(got.kind).toBe(expected);
    hit(`cancel:${expected}`);
  }));

const reviewCmd = fc.record({ x: execPick, fence: fc.constantFrom<'current' | 'zombie' | 'none'>('current', 'zombie', 'none') }).map(({ x, fence: f }) =>
  command(`markNeedsReview(#${x.pick}, ${f})`, hasExec, async (m, r) => {
    const e = pickExec(m, x.pick, x.preferOpen, (y) => y.status === 'running' || y.status === 'waiting');
    const owner = f === 'none' ? undefined : fenceOwner(e, f);
    const expected = (e.status === 'running' || e.status === 'waiting') && (owner === undefined || e.owner === owner);
    expect(await markNeedsReview(r.db, { executionId: e.id, owner, errorCode: 'provider_outcome_unknown', errorMessage: 'model' })).toBe(expected);
    hit(`review:${expected}`);
    if (expected) Object.assign(e, { status: 'needs_review', owner: null, deadline: null });
  }));

const resolveCmd = fc.record({ pick: fc.nat(), ok: fc.boolean(), charge: fc.nat({ max: 300_000 }) }).map(({ pick, ok, charge }) =>
  command(`resolve(#${pick}, ${ok ? 'succeeded' : 'failed'}, ${charge})`, hasExec, async (m, r) => {
    const review = m.execs.filter((e) => e.status === 'needs_review');
    const e = review.length > 0 ? review[pick % review.length]! : m.execs[pick % m.execs.length]!;
    const got = await settleExecution(r.db, { executionId: e.id, projectId: r.projectIds[e.project]!, status: ok ? 'succeeded' : 'failed', chargedMicros: charge, from: ['needs_review'], kind: 'resolve' });
    hit(e.status === 'needs_review' ? 'resolve:applied' : 'resolve:refused');
    expect(got?.chargedMicros ?? null).toBe(e.status === 'needs_review' ? settle(m, e, ok ? 'succeeded' : 'failed', charge) : null);
  }));

const waitCmd = fc.record({ x: execPick, fence }).map(({ x, fence: f }) =>
  command(`enterWaiting(#${x.pick}, ${f})`, hasExec, async (m, r) => {
    const e = pickExec(m, x.pick, x.preferOpen, isRunning);
    const owner = fenceOwner(e, f);
    const expected = e.status === 'running' && e.owner === owner;
    const got = await enterWaiting(r.db, { executionId: e.id, owner, recheckDeadlineMs: RECHECK_MS });
    expect(got).toBe(expected);
    // no outbox row: the worker's delayed message brings it back, the deadline if that is lost
    if (expected) Object.assign(e, { status: 'waiting', owner: null, deadline: m.clock + RECHECK_MS });
  }));

const abandonCmd = execPick.map(({ pick, preferOpen }) =>
  command(`abandon(#${pick})`, hasExec, async (m, r) => {
    const e = pickExec(m, pick, preferOpen, (y) => (y.status === 'queued' || y.status === 'running') && (y.owner === null || isPast(m, y.deadline)));
    const got = await abandonExecution(r.db, { executionId: e.id, errorCode: 'delivery_limit_exceeded', errorMessage: 'model' });
    const outcome = abandon(m, e);
    hit(`abandon:${outcome}`);
    expect(got).toBe(outcome);
  }));

/** The janitor's pass over uploads: expired ones go, unless an execution that has not ended reads them. */
const janitorCmd = fc.constant(null).map(() => command('janitor(files)', () => true, janitor));
async function janitor(m: Model, r: Real): Promise<void> {
    const deleted: string[] = [];
    await sweepExpired(r.db, 'files', 10_000, async (key) => void deleted.push(key));
    const reading = new Set(m.execs.filter((e) => isOpenForWork(e) || e.status === 'needs_review').flatMap((e) => e.files));
    for (const f of m.files) {
      if (f.deleted || f.expiresAt >= m.clock || reading.has(f.id)) continue;
      f.deleted = true;
      hit('janitor:deleted');
    }
    if (m.files.some((f) => !f.deleted && f.expiresAt < m.clock && reading.has(f.id))) hit('janitor:kept_in_use');
}

/** One relay pass, as Relay.tick does it: reap what is past its deadline, abandon the exhausted, sweep the outbox. */
async function relayTick(m: Model, r: Real): Promise<void> {
  const mine = new Set(m.execs.map((e) => e.id));
  const due = m.execs.filter((e) => isOpenForWork(e) && isPast(m, e.deadline));
  const crashed = (e: MExec) => e.status === 'running' && e.owner !== null;
  const exhausted = due.filter((e) => crashed(e) && e.attempts + 1 >= MAX_ATTEMPTS);
  const requeued = due.filter((e) => !exhausted.includes(e));
  // The database is shared by every run of this file: leftovers of earlier runs may be reaped too; only ours are compared.
  const got = await reapExpiredLeases(r.db, { limit: 10_000, maxAttempts: MAX_ATTEMPTS, redispatchMs: REDISPATCH_MS });
  expect({ requeued: got.requeued.filter((id) => mine.has(id)).sort(), exhausted: got.exhausted.filter((id) => mine.has(id)).sort() })
    .toEqual({ requeued: requeued.map((e) => e.id).sort(), exhausted: exhausted.map((e) => e.id).sort() });
  for (const e of requeued) {
    hit(`reap:${e.status}${crashed(e) ? ':lease_lost' : ''}`);
    const next = e.status === 'queued' ? Math.min(Math.max(REDISPATCH_MS, m.clock - e.createdAt), MAX_REDISPATCH_MS) : REDISPATCH_MS;
    Object.assign(e, { attempts: e.attempts + (crashed(e) ? 1 : 0), owner: null, deadline: m.clock + next, outboxTotal: e.outboxTotal + 1, outboxUnsent: e.outboxUnsent + 1 });
  }
  for (const e of exhausted) e.attempts += 1;
  for (const id of got.exhausted) {
    const outcome = await abandonExecution(r.db, { executionId: id, errorCode: 'delivery_limit_exceeded', errorMessage: 'model' });
    const e = m.execs.find((x) => x.id === id);
    if (e) expect(outcome).toBe(abandon(m, e));
    if (e) hit(`reap:exhausted:${outcome}`);
  }
  await sweepOutbox(r.db, { graceMs: 0, limit: 10_000 }, async (rows) => ({ published: rows.map((row) => row.id), failed: [] }));
  for (const e of m.execs) e.outboxUnsent = 0;
}
const relayCmd = fc.constant(null).map(() => command('relayTick()', () => true, relayTick));

/**
 * Liveness, on the database alone: whatever state the commands left, the broker loses every
 * message it holds (a purge); then time passes in steps and after each the relay passes and a
 * worker runs whatever message it publishes to the end. Every accepted execution must end:
 * terminal, or needs_review (an operator's), never stranded with its money held.
 */
async function checkLiveness(r: Real, startClock: number): Promise<void> {
  let clock = startClock;
  const ours = async () => db('executions').whereIn('project_id', r.projectIds).select('id', 'project_id', 'status', 'reserved_micros');
  // the purge: what was published is gone; what is unsent now will be marked sent and dropped too
  await sweepOutbox(db, { graceMs: 0, limit: 10_000 }, async (rows) => ({ published: rows.map((row) => row.id), failed: [] }));
  for (let round = 0; round < 12; round++) {
    clock += 40 * MIN;
    await setClock(clock);
    const { exhausted } = await reapExpiredLeases(db, { limit: 10_000, maxAttempts: MAX_ATTEMPTS, redispatchMs: REDISPATCH_MS });
    for (const id of exhausted) await abandonExecution(db, { executionId: id, errorCode: 'delivery_limit_exceeded', errorMessage: 'liveness' });
    const delivered: string[] = [];
    await sweepOutbox(db, { graceMs: 0, limit: 10_000 }, async (rows) => {
      delivered.push(...rows.map((row) => row.message.executionId));
      return { published: rows.map((row) => row.id), failed: [] };
    });
    const mine = new Set((await ours()).map((e) => e.id as string));
    for (const id of delivered.filter((x) => mine.has(x))) {
      const owner = `liveness-${round}`;
      const e = await claimExecution(db, id, owner, LEASE_TTL_MS);
      if (!e) continue;
      const steps = await getSteps(db, e.projectId, [id]);
      if (steps.some((s) => s.status === 'running' && s.externalRef === null)) {
        await markNeedsReview(db, { executionId: id, owner, errorCode: 'provider_outcome_unknown', errorMessage: 'liveness' });
        continue;
      }
      const cost = steps.filter((s) => s.status === 'succeeded').reduce((a, s) => a + s.costMicros, 0);
      await settleExecution(db, { executionId: id, projectId: e.projectId, status: e.cancelRequested ? 'cancelled' : 'succeeded', chargedMicros: cost, from: ['running'], leaseOwner: owner });
    }
    if ((await ours()).every((e) => !['queued', 'running', 'waiting'].includes(e.status as string))) {
      hit(`liveness:ended_after_${round + 1}_rounds`);
      return;
    }
  }
  const stuck = (await ours()).filter((e) => ['queued', 'running', 'waiting'].includes(e.status as string));
  throw new Error(`liveness: executions never ended: ${JSON.stringify(stuck)}`);
}

// Repetition is weight: the step and lease commands must outnumber the ones that end an execution.
const commands = [
  creditCmd, capCmd, uploadCmd, uploadCmd, workCmd, workCmd, submitCmd, submitCmd, submitCmd, claimCmd, claimCmd, claimCmd, claimCmd, clockCmd, clockCmd, releaseCmd,
  startStepCmd, startStepCmd, startStepCmd, finishStepCmd, finishStepCmd, finishStepCmd, settleCmd, settleCmd, cancelCmd, reviewCmd, resolveCmd,
  waitCmd, abandonCmd, janitorCmd, janitorCmd, relayCmd, relayCmd, pricesCmd,
];

test('the ledger agrees with a model of balances, leases and uploads after every command, and every execution ends', async () => {
  const seed = Number(process.env.LEDGER_MODEL_SEED ?? Date.now() % 2 ** 31);
  const path = process.env.LEDGER_MODEL_PATH;
  const replayPath = process.env.LEDGER_MODEL_REPLAY; // the counterexample's /*replayPath="..."*/
  let runs = 0;
  await fc.assert(
    fc.asyncProperty(fc.commands(commands, { maxCommands: 50, size: 'max', ...(replayPath ? { replayPath } : {}) }), async (cmds) => {
      runs += 1;
      let real: Real | undefined;
      let model: Model | undefined;
      const setup = async () => {
        await setClock(0);
        const seeded = await Promise.all(INITIAL_CAPS.map((cap) => seedProject(db, { creditMicros: INITIAL_CREDIT, monthlyCapMicros: cap })));
        model = {
          projects: INITIAL_CAPS.map((cap) => ({ available: INITIAL_CREDIT, reserved: 0, capMonth: null, monthCharged: 0, cap, usage: new Map() })),
          execs: [],
          files: [],
          seq: 0,
          clock: 0,
          prices: [(await publishPrices(db, { model: 0, run: randomBytes(4).toString('hex') })).priceVersion],
        };
        real = { db, projectIds: seeded.map((s) => s.projectId), keyIds: seeded.map((s) => s.keyId) };
        return { model, real };
      };
      await fc.asyncModelRun(setup, cmds);
      await checkLiveness(real!, model!.clock);
    }),
    { numRuns: Number(process.env.LEDGER_MODEL_RUNS ?? 120), seed, ...(path ? { path } : {}) },
  );
  // eslint-disable-next-line no-console
  console.log(`ledger model: ${runs} runs, ${commandsRun} commands checked, seed ${seed}\n${JSON.stringify(Object.fromEntries([...hits].sort()))}`);
}, 240_000);
