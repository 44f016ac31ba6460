import fc from 'fast-check';
import type { Knex } from 'knex';
import { isAppError, newId, type ExecutionStatus } from '@tes/core';
import {
  abandonExecution, auditLedger, cancelExecution, claimExecution, createDb, creditBalance, enterWaiting, finishStep, getExecution,
  markNeedsReview, monthKey, reapExpiredLeases, setMonthlyCap, settleExecution, startStep, submitExecution, sweepOutbox,
} from '@tes/db';
import { createTestDatabase, seedProject, type TestDatabase } from '@tes/testing';

/*
 * Model-based test of the money SQL (libs/db/src/executions.ts, accounts.ts, outbox.ts):
 * random command sequences run against the real repository functions on a real database
 * and against a small in-memory model; after every command the balances, statuses,
 * charges, leases, steps and outbox rows must agree and auditLedger must be ok.
 * A failure shrinks and fast-check prints `seed`, `path` and the counterexample's replayPath;
 * replay it with LEDGER_MODEL_SEED=<seed> LEDGER_MODEL_PATH=<path> LEDGER_MODEL_REPLAY=<replayPath>.
 * Hazard: the month is read once; a run that crosses a UTC month boundary resets the cap
 * counters under the model.
 */

type Deadline = 'none' | 'future' | 'past';
interface MStep { status: 'running' | 'succeeded' | 'failed'; cost: number; external: boolean; attempts: number }
interface MExec {
  id: string; project: number; key: string; status: ExecutionStatus; reserved: number; charged: number; cancelRequested: boolean;
  owner: string | null; deadline: Deadline; attempts: number; steps: MStep[]; outboxTotal: number; outboxUnsent: number;
}
interface MProject { available: number; reserved: number; monthCharged: number; cap: number | null; settled: number; settledCharge: number }
interface Model { projects: MProject[]; execs: MExec[]; seq: number }
interface Real { db: Knex; projectIds: string[]; keyIds: string[] }
type Cmd = fc.AsyncCommand<Model, Real>;

const MAX_ATTEMPTS = 2; // small, so the reaper's "exhausted" branch is reachable in short sequences
const INITIAL_CREDIT = 400_000;
/** Project 0 starts uncapped; 1 and 2 start with caps tight enough that reservations meet them. */
const INITIAL_CAPS = [null, 250_000, 500_000];
const LEASE_TTL_MS = 60_000;

let database: TestDatabase;
let db: Knex;
let month: string;
let commandsRun = 0;
/** How often each interesting outcome happened, printed at the end: a model that never reaches a branch proves nothing about it. */
const hits = new Map<string, number>();
const hit = (what: string) => hits.set(what, (hits.get(what) ?? 0) + 1);

beforeAll(async () => {
  database = await createTestDatabase();
  db = createDb({ url: database.url, poolMax: 4 });
  month = monthKey();
});
afterAll(async () => {
  await db?.destroy();
  await database?.drop();
});

// ---- the model's rules (api-contract.md "Money rules", "States and moves") ----
const isOpenForWork = (e: MExec) => e.status === 'queued' || e.status === 'running' || e.status === 'waiting';
const succeededCost = (e: MExec) => e.steps.filter((s) => s.status === 'succeeded').reduce((a, s) => a + s.cost, 0);

function settle(m: Model, e: MExec, status: ExecutionStatus, charge: number): number {
  const p = m.projects[e.project]!;
  e.charged = Math.min(charge, e.reserved);
  e.status = status;
  e.owner = null;
  e.deadline = 'none';
  p.reserved -= e.reserved;
  p.available += e.reserved - e.charged;
  p.monthCharged += e.charged;
  p.settled += 1;
  p.settledCharge += e.charged;
  return e.charged;
}

/** abandonExecution's rule: an external step with no outcome may have cost money -> needs_review. */
function abandon(m: Model, e: MExec): 'failed' | 'needs_review' | 'not_abandoned' {
  if (!(e.status === 'queued' || e.status === 'running') || !(e.owner === null || e.deadline === 'past')) return 'not_abandoned';
  if (e.steps.some((s) => s.status === 'running' && s.external)) {
    Object.assign(e, { status: 'needs_review', owner: null, deadline: 'none' });
    return 'needs_review';
  }
  settle(m, e, 'failed', succeededCost(e));
  return 'failed';
}

// ---- comparison with the database after every command ----
async function compare(m: Model, r: Real): Promise<void> {
  commandsRun += 1;
  const projects = await db('projects as p')
    .leftJoin('usage_counters as u', function () { this.on('u.project_id', 'p.id').andOn('u.month', db.raw('?::date', [month])); })
    .whereIn('p.id', r.projectIds)
    .select('p.id', 'p.available_micros', 'p.reserved_micros', 'p.monthly_cap_micros', 'u.execution_count', 'u.charged_micros',
      db.raw('CASE WHEN p.cap_month = ?::date THEN p.month_charged_micros ELSE 0 END AS month_charged', [month]));
  const byId = new Map(projects.map((p) => [p.id as string, p]));
  expect(r.projectIds.map((id) => {
    const p = byId.get(id)!;
    return { available: p.available_micros, reserved: p.reserved_micros, monthCharged: p.month_charged, cap: p.monthly_cap_micros,
      settled: p.execution_count ?? 0, settledCharge: p.charged_micros ?? 0 };
  })).toEqual(m.projects);

  const execs = await db.raw<{ rows: Record<string, unknown>[] }>(
    `SELECT e.id, e.status, e.reserved_micros, e.charged_micros, e.cancel_requested, e.lease_owner, e.attempts,
            CASE WHEN e.lease_expires_at IS NULL THEN 'none' WHEN e.lease_expires_at < now() THEN 'past' ELSE 'future' END AS deadline,
            (SELECT coalesce(json_agg(json_build_object('status', s.status, 'cost', s.cost_micros, 'external', s.external,
                     'attempts', s.attempts) ORDER BY s.index), '[]'::json) FROM execution_steps s WHERE s.execution_id = e.id) AS steps,
            (SELECT count(*)::int FROM outbox o WHERE o.execution_id = e.id) AS outbox_total,
            (SELECT count(*)::int FROM outbox o WHERE o.execution_id = e.id AND o.published_at IS NULL) AS outbox_unsent
       FROM executions e WHERE e.project_id = ANY(?::text[]) ORDER BY e.id`, [r.projectIds] as unknown as Knex.RawBinding[]);
  expect(execs.rows.map((e) => ({
    id: e.id, status: e.status, reserved: e.reserved_micros, charged: e.charged_micros, cancelRequested: e.cancel_requested,
    owner: e.lease_owner, deadline: e.deadline, attempts: e.attempts, steps: e.steps, outboxTotal: e.outbox_total, outboxUnsent: e.outbox_unsent,
  }))).toEqual([...m.execs].sort((a, b) => (a.id < b.id ? -1 : 1)).map(({ project: _p, key: _k, ...rest }) => rest));

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

const creditCmd = fc.record({ project, micros: fc.integer({ min: 1, max: 400_000 }) }).map(({ project: i, micros }) =>
  command(`credit(p${i}, ${micros})`, () => true, async (m, r) => {
    await creditBalance(r.db, { projectId: r.projectIds[i]!, micros, reference: 'model' });
    m.projects[i]!.available += micros;
  }));

const capCmd = fc.record({ project, cap: fc.option(fc.integer({ min: 0, max: 400_000 }), { freq: 3 }) }).map(({ project: i, cap }) =>
  command(`setMonthlyCap(p${i}, ${cap})`, () => true, async (m, r) => {
    await setMonthlyCap(r.db, r.projectIds[i]!, cap);
    m.projects[i]!.cap = cap;
  }));

const submitCmd = fc.record({ project, reserve: fc.oneof({ weight: 1, arbitrary: fc.constant(0) }, { weight: 5, arbitrary: fc.integer({ min: 1, max: 250_000 }) }), repeat: fc.option(fc.nat(), { freq: 4 }) })
  .map(({ project: i, reserve, repeat }) =>
    command(`submit(p${i}, ${reserve}${repeat === null ? '' : `, repeat #${repeat}`})`, () => true, async (m, r) => {
      const mine = m.execs.filter((e) => e.project === i);
      const original = repeat !== null && mine.length > 0 ? mine[repeat % mine.length]! : undefined;
      const key = original?.key ?? `key-${(m.seq += 1)}`;
      const p = m.projects[i]!;
      // Prediction: a bound key returns its execution untouched; else balance first, then cap.
      const expected = original ? 'existing'
        : p.available < reserve ? 'insufficient_balance'
        : p.cap !== null && p.monthCharged + p.reserved + reserve > p.cap ? 'monthly_cap_exceeded' : 'created';
      const id = newId('exe');
      let outcome: string;
      let gotId: string | undefined;
      try {
        const res = await submitExecution(r.db, {
          id, projectId: r.projectIds[i]!, apiKeyId: r.keyIds[i]!, tool: 'test.sleep', model: 'default', category: 'test', arguments: { n: m.seq },
          priceVersion: 'model', totalSteps: 3, reservedMicros: reserve, idempotencyKey: key, requestDigest: 'digest', routingKey: 'model.test',
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
        deadline: 'none', attempts: 0, steps: [], outboxTotal: 1, outboxUnsent: 1 });
    }));

const claimCmd = execPick.map(({ pick, preferOpen }) =>
  command(`claim(#${pick}${preferOpen ? '' : ', any'})`, hasExec, async (m, r) => {
    const e = pickExec(m, pick, preferOpen, (x) => isOpenForWork(x) && (x.owner === null || x.deadline === 'past'));
    const owner = `worker-${(m.seq += 1)}`;
    const expected = isOpenForWork(e) && (e.owner === null || e.deadline === 'past');
    const got = await claimExecution(r.db, e.id, owner, LEASE_TTL_MS);
    expect(got !== null).toBe(expected);
    hit(`claim:${expected ? e.status : 'refused'}`);
    if (!expected) return;
    e.attempts += e.status === 'waiting' ? 0 : 1;
    Object.assign(e, { status: 'running', owner, deadline: 'future' });
  }));

/** A worker dies: its lease runs out, and often the relay passes right after. */
const expireCmd = fc.record({ pick: fc.nat(), preferOpen: fc.constantFrom(true, true, true, false), relay: fc.boolean() }).map(({ pick, preferOpen, relay }) =>
  command(`expireLease(#${pick}${relay ? ', then relayTick' : ''})`, hasExec, async (m, r) => {
    const e = pickExec(m, pick, preferOpen, (x) => x.deadline === 'future');
    await r.db.raw(`UPDATE executions SET lease_expires_at = now() - interval '1 second' WHERE id = ? AND lease_expires_at IS NOT NULL`, [e.id]);
    if (e.deadline !== 'none') e.deadline = 'past';
    if (relay) await relayTick(m, r);
  }));

const startStepCmd = fc.record({ x: execPick, fence, external: fc.boolean() }).map(({ x, fence: f, external }) =>
  command(`startStep(#${x.pick}, ${f}, external=${external})`, hasExec, async (m, r) => {
    const e = pickExec(m, x.pick, x.preferOpen, isRunning);
    // The engine resumes at the first step that has not succeeded (a restart keeps the row's cost and external flag).
    const index = e.steps.findIndex((s) => s.status !== 'succeeded');
    const at = index === -1 ? e.steps.length : index;
    const owner = fenceOwner(e, f);
    const expected = e.status === 'running' && e.owner === owner;
    const got = await startStep(r.db, { executionId: e.id, projectId: r.projectIds[e.project]!, index: at, name: `s${at}`, owner, external });
    expect(got).toBe(expected);
    if (!expected) return;
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
    if (expected) Object.assign(e, { status: 'needs_review', owner: null, deadline: 'none' });
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
    const got = await enterWaiting(r.db, { executionId: e.id, projectId: r.projectIds[e.project]!, owner, routingKey: 'model.test', recheckDeadlineMs: LEASE_TTL_MS });
    expect(got !== null).toBe(expected);
    if (expected) Object.assign(e, { status: 'waiting', owner: null, deadline: 'future', outboxTotal: e.outboxTotal + 1, outboxUnsent: e.outboxUnsent + 1 });
  }));

const abandonCmd = execPick.map(({ pick, preferOpen }) =>
  command(`abandon(#${pick})`, hasExec, async (m, r) => {
    const e = pickExec(m, pick, preferOpen, (y) => (y.status === 'queued' || y.status === 'running') && (y.owner === null || y.deadline === 'past'));
    const got = await abandonExecution(r.db, { executionId: e.id, errorCode: 'delivery_limit_exceeded', errorMessage: 'model' });
    const outcome = abandon(m, e);
    hit(`abandon:${outcome}`);
    expect(got).toBe(outcome);
  }));

/** One relay pass, as Relay.tick does it: reap expired leases, abandon the exhausted, sweep the outbox. */
async function relayTick(m: Model, r: Real): Promise<void> {
  const mine = new Set(m.execs.map((e) => e.id));
  const due = m.execs.filter((e) => (e.status === 'running' || e.status === 'waiting') && e.deadline === 'past');
  const exhausted = due.filter((e) => e.status === 'running' && e.attempts >= MAX_ATTEMPTS);
  const requeued = due.filter((e) => !exhausted.includes(e));
  // The database is shared by every run of this file: leftovers of earlier runs may be reaped too; only ours are compared.
  const got = await reapExpiredLeases(r.db, { limit: 10_000, routingKeyFor: (c) => `model.${c}`, maxAttempts: MAX_ATTEMPTS });
  expect({ requeued: got.requeued.filter((id) => mine.has(id)).sort(), exhausted: got.exhausted.filter((id) => mine.has(id)).sort() })
    .toEqual({ requeued: requeued.map((e) => e.id).sort(), exhausted: exhausted.map((e) => e.id).sort() });
  if (requeued.length > 0) hit('reap:requeued');
  for (const e of requeued) Object.assign(e, { owner: null, deadline: 'future', outboxTotal: e.outboxTotal + 1, outboxUnsent: e.outboxUnsent + 1 });
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

// Repetition is weight: the step and lease commands must outnumber the ones that end an execution.
const commands = [
  creditCmd, capCmd, submitCmd, submitCmd, submitCmd, claimCmd, claimCmd, claimCmd, expireCmd, expireCmd, startStepCmd, startStepCmd,
  startStepCmd, finishStepCmd, finishStepCmd, finishStepCmd, settleCmd, settleCmd, cancelCmd, reviewCmd, resolveCmd, waitCmd, abandonCmd, relayCmd, relayCmd,
];

test('the ledger agrees with a model of balances after every command', async () => {
  const seed = Number(process.env.LEDGER_MODEL_SEED ?? Date.now() % 2 ** 31);
  const path = process.env.LEDGER_MODEL_PATH;
  const replayPath = process.env.LEDGER_MODEL_REPLAY; // the counterexample's /*replayPath="..."*/
  let runs = 0;
  await fc.assert(
    fc.asyncProperty(fc.commands(commands, { maxCommands: 50, size: 'max', ...(replayPath ? { replayPath } : {}) }), async (cmds) => {
      runs += 1;
      const setup = async () => {
        const seeded = await Promise.all(INITIAL_CAPS.map((cap) => seedProject(db, { creditMicros: INITIAL_CREDIT, monthlyCapMicros: cap })));
        const model: Model = {
          projects: INITIAL_CAPS.map((cap) => ({ available: INITIAL_CREDIT, reserved: 0, monthCharged: 0, cap, settled: 0, settledCharge: 0 })),
          execs: [],
          seq: 0,
        };
        return { model, real: { db, projectIds: seeded.map((s) => s.projectId), keyIds: seeded.map((s) => s.keyId) } };
      };
      await fc.asyncModelRun(setup, cmds);
    }),
    { numRuns: 60, seed, ...(path ? { path } : {}) },
  );
  // eslint-disable-next-line no-console
  console.log(`ledger model: ${runs} runs, ${commandsRun} commands checked, seed ${seed}\n${JSON.stringify(Object.fromEntries([...hits].sort()))}`);
}, 120_000);
