import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import { isAppError, newId } from '@tes/core';
import {
  abandonExecution,
  cancelExecution,
  claimExecution,
  creditBalance,
  enterWaiting,
  finishStep,
  getExecution,
  markNeedsReview,
  MAX_REDISPATCH_MS,
  publishPrices,
  reapExpiredLeases,
  recordUpload,
  releaseLease,
  setMonthlyCap,
  settleExecution,
  startStep,
  submitExecution,
  sweepExpired,
  sweepOutbox,
} from '@tes/db';
import { compare } from './compare';
import {
  abandon,
  claimable,
  DISPATCH_MS,
  hit,
  isOpenForWork,
  isPast,
  LEASE_TTL_MS,
  MAX_ATTEMPTS,
  MIN,
  monthCharged,
  RECHECK_MS,
  REDISPATCH_MS,
  setClock,
  settle,
  succeededCost,
  type Cmd,
  type MExec,
  type Model,
  type Real,
} from './model';

/*
 * The commands of ledger-model.test.ts: each runs one repository function on the database and
 * the model's prediction of it, then compares the two (compare.ts).
 */

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
  return {
    check,
    toString: () => label,
    run: async (m, r) => {
      await body(m, r);
      await compare(m, r);
    },
  };
}

const project = fc.nat({ max: 2 });
const execPick = fc.record({ pick: fc.nat(), preferOpen: fc.constantFrom(true, true, true, false) });
const fence = fc.constantFrom<'current' | 'zombie'>('current', 'current', 'current', 'zombie');

const creditCmd = fc.record({ project, micros: fc.integer({ min: 1, max: 400_000 }), again: fc.boolean() }).map(({ project: i, micros, again }) =>
  command(
    `credit(p${i}, ${micros}${again ? ', retried' : ''})`,
    () => true,
    async (m, r) => {
      const reference = `model-${(m.seq += 1)}`;
      await creditBalance(r.db, { projectId: r.projectIds[i]!, micros, reference });
      // A retried credit (same reference) is a no-op.
      if (again) expect(await creditBalance(r.db, { projectId: r.projectIds[i]!, micros, reference })).toMatchObject({ replayed: true });
      m.projects[i]!.available += micros;
    },
  ),
);

const capCmd = fc.record({ project, cap: fc.option(fc.integer({ min: 0, max: 400_000 }), { freq: 3 }) }).map(({ project: i, cap }) =>
  command(
    `setMonthlyCap(p${i}, ${cap})`,
    () => true,
    async (m, r) => {
      await setMonthlyCap(r.db, r.projectIds[i]!, cap);
      m.projects[i]!.cap = cap;
    },
  ),
);

/** An operator publishes new prices: submits quoted under the old ones are refused, nothing reserved. */
const pricesCmd = fc.constant(null).map(() =>
  command(
    'publishPrices()',
    () => true,
    async (m, r) => {
      m.prices.push((await publishPrices(r.db, { model: (m.seq += 1), run: randomBytes(4).toString('hex') })).priceVersion);
    },
  ),
);

/** Time passes on the database's clock: leases, deadlines and uploads expire; months end. */
const clockCmd = fc.record({ step: fc.constantFrom(10 * MIN, 20 * MIN, 70 * MIN, 35 * 24 * 60 * MIN), relay: fc.boolean() }).map(({ step, relay }) =>
  command(
    `advanceClock(${step / MIN} min${relay ? ', then relayTick and janitor' : ''})`,
    () => true,
    async (m, r) => {
      m.clock += step;
      await setClock(r.db, m.clock);
      if (!relay) return;
      await relayTick(m, r);
      await janitor(m, r);
    },
  ),
);

/**
 * A worker that gets an execution through to the end: claim, one step that costs `cost`,
 * settle (or cancelled, when a cancel was accepted before the step). Deep paths, often.
 */
const workCmd = fc.record({ pick: fc.nat(), cost: fc.integer({ min: 0, max: 150_000 }) }).map(({ pick, cost }) =>
  command(
    `work(#${pick}, ${cost})`,
    (m) => m.execs.some((e) => claimable(m, e)),
    async (m, r) => {
      const e = pickExec(m, pick, true, (x) => claimable(m, x));
      // the lease is the worker and the claim's number
      const owner = `worker-${(m.seq += 1)}:${e.claims + 1}`;
      const got = await claimExecution(r.db, e.id, owner.split(':')[0]!, LEASE_TTL_MS);
      expect({ lease: got?.lease, stepsRecorded: got?.stepsRecorded }).toEqual({ lease: owner, stepsRecorded: e.steps.length > 0 });
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
      const settled = await settleExecution(r.db, {
        executionId: e.id,
        projectId,
        status,
        chargedMicros: succeededCost(e),
        from: ['running'],
        leaseOwner: owner,
      });
      expect(settled?.chargedMicros).toBe(settle(m, e, status, succeededCost(e)));
      hit(`work:${status}`);
    },
  ),
);

const uploadCmd = fc.record({ project, retention: fc.constantFrom(25 * MIN, 45 * MIN, 30 * 24 * 60 * MIN) }).map(({ project: i, retention }) =>
  command(
    `upload(p${i}, ${retention / MIN} min)`,
    () => true,
    async (m, r) => {
      const sha = randomBytes(32).toString('hex');
      const { file } = await recordUpload(r.db, {
        projectId: r.projectIds[i]!,
        sha256: sha,
        format: 'png',
        mimeType: 'image/png',
        sizeBytes: 1,
        storageKey: `k/${sha}`,
        retentionMs: retention,
      });
      m.files.push({ id: file.id, project: i, expiresAt: m.clock + retention, deleted: false });
    },
  ),
);

const submitCmd = fc
  .record({
    project,
    reserve: fc.oneof({ weight: 1, arbitrary: fc.constant(0) }, { weight: 5, arbitrary: fc.integer({ min: 1, max: 250_000 }) }),
    repeat: fc.option(fc.nat(), { freq: 4 }),
    files: fc.oneof(fc.constant<number[]>([]), fc.array(fc.nat(), { minLength: 1, maxLength: 2 })),
    liveFiles: fc.constantFrom(true, true, true, false),
    stalePrice: fc.constantFrom(false, false, false, false, true),
  })
  .map(({ project: i, reserve, repeat, files: filePicks, liveFiles, stalePrice }) =>
    command(
      `submit(p${i}, ${reserve}${repeat === null ? '' : `, repeat #${repeat}`}, files ${JSON.stringify(filePicks)}${stalePrice ? ', quoted under the first prices' : ''})`,
      () => true,
      async (m, r) => {
        const priceVersion = stalePrice ? m.prices[0]! : m.prices[m.prices.length - 1]!;
        const mine = m.execs.filter((e) => e.project === i);
        const original = repeat !== null && mine.length > 0 ? mine[repeat % mine.length]! : undefined;
        const key = original?.key ?? `key-${(m.seq += 1)}`;
        const p = m.projects[i]!;
        const live = m.files.filter((f) => f.project === i && !f.deleted && f.expiresAt > m.clock);
        const myFiles = liveFiles && live.length > 0 ? live : m.files.filter((f) => f.project === i);
        const files = myFiles.length > 0 ? filePicks.map((n) => myFiles[n % myFiles.length]!) : [];
        // Prediction: a bound key returns its execution untouched; else every file must be live, then balance, then cap.
        const expected = original
          ? 'existing'
          : files.some((f) => f.deleted || f.expiresAt <= m.clock)
            ? 'file_not_found'
            : priceVersion !== m.prices[m.prices.length - 1]
              ? 'price_version_mismatch'
              : p.available < reserve
                ? 'insufficient_balance'
                : p.cap !== null && monthCharged(m, p) + p.reserved + reserve > p.cap
                  ? 'monthly_cap_exceeded'
                  : 'created';
        const id = newId('exe');
        let outcome: string;
        let gotId: string | undefined;
        try {
          const res = await submitExecution(r.db, {
            id,
            projectId: r.projectIds[i]!,
            apiKeyId: r.keyIds[i]!,
            tool: 'test.sleep',
            model: 'default',
            category: 'test',
            arguments: { n: m.seq },
            priceVersion,
            totalSteps: 3,
            reservedMicros: reserve,
            idempotencyKey: key,
            requestDigest: 'digest',
            fileIds: files.map((f) => f.id),
            dispatchDeadlineMs: DISPATCH_MS,
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
        m.execs.push({
          id,
          project: i,
          key,
          status: 'queued',
          reserved: reserve,
          charged: 0,
          cancelRequested: false,
          owner: null,
          deadline: m.clock + DISPATCH_MS,
          attempts: 0,
          claims: 0,
          createdAt: m.clock,
          steps: [],
          outboxTotal: 1,
          outboxUnsent: 1,
          files: files.map((f) => f.id),
        });
      },
    ),
  );

const claimCmd = execPick.map(({ pick, preferOpen }) =>
  command(`claim(#${pick}${preferOpen ? '' : ', any'})`, hasExec, async (m, r) => {
    const e = pickExec(m, pick, preferOpen, (x) => claimable(m, x));
    const owner = `worker-${(m.seq += 1)}:${e.claims + 1}`;
    const expected = claimable(m, e);
    const got = await claimExecution(r.db, e.id, owner.split(':')[0]!, LEASE_TTL_MS);
    expect(got === null ? null : { lease: got.lease, stepsRecorded: got.stepsRecorded }).toEqual(
      expected ? { lease: owner, stepsRecorded: e.steps.length > 0 } : null,
    );
    hit(`claim:${expected ? e.status : 'refused'}`);
    if (!expected) return;
    Object.assign(e, { status: 'running', owner, deadline: m.clock + LEASE_TTL_MS, claims: e.claims + 1 });
  }),
);

/** A worker hands its execution back (graceful shutdown, a database outage): no attempt is spent. */
const releaseCmd = fc.record({ x: execPick, fence }).map(({ x, fence: f }) =>
  command(`releaseLease(#${x.pick}, ${f})`, hasExec, async (m, r) => {
    const e = pickExec(m, x.pick, x.preferOpen, (y) => isRunning(y) && y.owner !== null);
    const owner = fenceOwner(e, f);
    const expected = e.status === 'running' && e.owner === owner;
    expect(await releaseLease(r.db, e.id, owner, RECHECK_MS)).toBe(expected);
    hit(`release:${expected}`);
    if (expected) Object.assign(e, { owner: null, deadline: m.clock + RECHECK_MS });
  }),
);

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
  }),
);

const finishStepCmd = fc.record({ x: execPick, fence, ok: fc.boolean(), cost: fc.integer({ min: 0, max: 120_000 }) }).map(({ x, fence: f, ok, cost }) =>
  command(`finishStep(#${x.pick}, ${f}, ${ok ? 'succeeded' : 'failed'}, ${cost})`, hasExec, async (m, r) => {
    const e = pickExec(m, x.pick, x.preferOpen, isRunning);
    const index = Math.max(0, e.steps.length - 1);
    const owner = fenceOwner(e, f);
    const expected = e.status === 'running' && e.owner === owner && e.steps[index]?.status === 'running';
    const got = await finishStep(r.db, {
      executionId: e.id,
      projectId: r.projectIds[e.project]!,
      index,
      owner,
      status: ok ? 'succeeded' : 'failed',
      costMicros: cost,
    });
    expect(got).toBe(expected);
    if (expected) Object.assign(e.steps[index]!, { status: ok ? 'succeeded' : 'failed', cost });
  }),
);

const settleCmd = fc
  .record({
    x: execPick,
    fence,
    status: fc.constantFrom<'succeeded' | 'failed' | 'cancelled'>('succeeded', 'failed', 'cancelled'),
    extra: fc.oneof(fc.constant(0), fc.nat({ max: 500_000 })),
  })
  .map(({ x, fence: f, status, extra }) =>
    command(`settle(#${x.pick}, ${f}, ${status}, +${extra})`, hasExec, async (m, r) => {
      const e = pickExec(m, x.pick, x.preferOpen, isRunning);
      const owner = fenceOwner(e, f);
      const charge = succeededCost(e) + extra; // extra: a buggy worker over-reporting; settle caps at the reservation
      const expected = e.status === 'running' && e.owner === owner;
      const got = await settleExecution(r.db, {
        executionId: e.id,
        projectId: r.projectIds[e.project]!,
        status,
        chargedMicros: charge,
        from: ['running'],
        leaseOwner: owner,
      });
      const predicted = expected ? settle(m, e, status, charge) : null;
      hit(expected ? (charge > e.reserved ? 'settle:capped' : 'settle:applied') : 'settle:fenced');
      expect(got?.chargedMicros ?? null).toBe(predicted);
    }),
  );

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
  }),
);

const reviewCmd = fc.record({ x: execPick, fence: fc.constantFrom<'current' | 'zombie' | 'none'>('current', 'zombie', 'none') }).map(({ x, fence: f }) =>
  command(`markNeedsReview(#${x.pick}, ${f})`, hasExec, async (m, r) => {
    const e = pickExec(m, x.pick, x.preferOpen, (y) => y.status === 'running' || y.status === 'waiting');
    const owner = f === 'none' ? undefined : fenceOwner(e, f);
    const expected = (e.status === 'running' || e.status === 'waiting') && (owner === undefined || e.owner === owner);
    expect(await markNeedsReview(r.db, { executionId: e.id, owner, errorCode: 'provider_outcome_unknown', errorMessage: 'model' })).toBe(expected);
    hit(`review:${expected}`);
    if (expected) Object.assign(e, { status: 'needs_review', owner: null, deadline: null });
  }),
);

const resolveCmd = fc.record({ pick: fc.nat(), ok: fc.boolean(), charge: fc.nat({ max: 300_000 }) }).map(({ pick, ok, charge }) =>
  command(`resolve(#${pick}, ${ok ? 'succeeded' : 'failed'}, ${charge})`, hasExec, async (m, r) => {
    const review = m.execs.filter((e) => e.status === 'needs_review');
    const e = review.length > 0 ? review[pick % review.length]! : m.execs[pick % m.execs.length]!;
    const got = await settleExecution(r.db, {
      executionId: e.id,
      projectId: r.projectIds[e.project]!,
      status: ok ? 'succeeded' : 'failed',
      chargedMicros: charge,
      from: ['needs_review'],
      kind: 'resolve',
    });
    hit(e.status === 'needs_review' ? 'resolve:applied' : 'resolve:refused');
    expect(got?.chargedMicros ?? null).toBe(e.status === 'needs_review' ? settle(m, e, ok ? 'succeeded' : 'failed', charge) : null);
  }),
);

const waitCmd = fc.record({ x: execPick, fence }).map(({ x, fence: f }) =>
  command(`enterWaiting(#${x.pick}, ${f})`, hasExec, async (m, r) => {
    const e = pickExec(m, x.pick, x.preferOpen, isRunning);
    const owner = fenceOwner(e, f);
    const expected = e.status === 'running' && e.owner === owner;
    const got = await enterWaiting(r.db, { executionId: e.id, owner, recheckDeadlineMs: RECHECK_MS });
    expect(got).toBe(expected);
    // no outbox row: the worker's delayed message brings it back, the deadline if that is lost
    if (expected) Object.assign(e, { status: 'waiting', owner: null, deadline: m.clock + RECHECK_MS });
  }),
);

const abandonCmd = execPick.map(({ pick, preferOpen }) =>
  command(`abandon(#${pick})`, hasExec, async (m, r) => {
    const e = pickExec(m, pick, preferOpen, (y) => (y.status === 'queued' || y.status === 'running') && (y.owner === null || isPast(m, y.deadline)));
    const got = await abandonExecution(r.db, { executionId: e.id, errorCode: 'delivery_limit_exceeded', errorMessage: 'model' });
    const outcome = abandon(m, e);
    hit(`abandon:${outcome}`);
    expect(got).toBe(outcome);
  }),
);

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
  expect({ requeued: got.requeued.filter((id) => mine.has(id)).sort(), exhausted: got.exhausted.filter((id) => mine.has(id)).sort() }).toEqual({
    requeued: requeued.map((e) => e.id).sort(),
    exhausted: exhausted.map((e) => e.id).sort(),
  });
  for (const e of requeued) {
    hit(`reap:${e.status}${crashed(e) ? ':lease_lost' : ''}`);
    const next = e.status === 'queued' ? Math.min(Math.max(REDISPATCH_MS, m.clock - e.createdAt), MAX_REDISPATCH_MS) : REDISPATCH_MS;
    Object.assign(e, {
      attempts: e.attempts + (crashed(e) ? 1 : 0),
      owner: null,
      deadline: m.clock + next,
      outboxTotal: e.outboxTotal + 1,
      outboxUnsent: e.outboxUnsent + 1,
    });
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

// Repetition is weight: the step and lease commands must outnumber the ones that end an execution.
export const commands = [
  creditCmd,
  capCmd,
  uploadCmd,
  uploadCmd,
  workCmd,
  workCmd,
  submitCmd,
  submitCmd,
  submitCmd,
  claimCmd,
  claimCmd,
  claimCmd,
  claimCmd,
  clockCmd,
  clockCmd,
  releaseCmd,
  startStepCmd,
  startStepCmd,
  startStepCmd,
  finishStepCmd,
  finishStepCmd,
  finishStepCmd,
  settleCmd,
  settleCmd,
  cancelCmd,
  reviewCmd,
  resolveCmd,
  waitCmd,
  abandonCmd,
  janitorCmd,
  janitorCmd,
  relayCmd,
  relayCmd,
  pricesCmd,
];
