import { setTimeout as sleep } from 'node:timers/promises';
import fc from 'fast-check';
import { auditLedger } from '@tes/db';
import { ObjectStore } from '@tes/storage';
import { seedProject, startEmbeddedS3, useTestDatabase, type EmbeddedS3 } from '@tes/testing';
import { bucketKeys, MiniStack } from './engine-model/stack';
import { modelPrices, submitModel, UNIT_MICROS, type ModelStep } from './engine-model/tool';

/*
 * The engine in the model (issue #26): the real StepEngine, on a real database and a real S3
 * server, runs random executions (1-2 of 1-2 steps; a step may store a file, may be a provider's
 * step) while faults are injected at random times:
 *
 * - slow PUTs: every object upload takes 2.5 s, longer than the 1.5 s lease TTL;
 * - stalls of the engine's database connections (a TCP relay holds its bytes): short ones
 *   (250 ms, well within the TTL: nothing may be lost) and long ones (3 s: renewals go
 *   unconfirmed, the engine must stop as if its lease were lost, and the reaper takes it);
 * - a restart: the engine is stopped as at a shutdown (running work is handed back) and a new
 *   one, with a new worker id, takes over.
 *
 * Around it, the relay's reaper (attempts, re-dispatch, abandonment after 5 lost leases) and a
 * queue for the broker (see engine-model/stack.ts). After each run:
 *
 * - every execution ends (terminal, or needs_review for an operator);
 * - charged at most once (one settlement in the journal), never above the reservation, and a
 *   succeeded execution is charged exactly its steps;
 * - no provider step is sent twice (the fake provider counts creates per execution step);
 * - the artifacts rows and the objects in the bucket are the same set (no row without its
 *   object, no object without its row);
 * - the ledger audit is ok, and the engine threw nothing;
 * - no work is thrown away without cause: an attempt is spent (a lease lost) only to a long
 *   stall, so an execution has at most as many attempts as there were long stalls, never
 *   fails, and ends in needs_review only if a long stall hid whether its provider job was
 *   recorded. (A lease that expires while an upload runs breaks this: issue #26, defect 3.)
 *
 * The first run is always SLOW_UPLOADS, then random ones. A failure prints the seed and the
 * counterexample (no shrinking: each run takes seconds);
 * replay with ENGINE_MODEL_SEED=<seed>; ENGINE_MODEL_RUNS sets the number of runs (default 5).
 */
const LEASE_TTL_MS = 1_500;
const SLOW_PUT_MS = 2_500;
const SHORT_STALL_MS = 250;
const LONG_STALL_MS = 3_000;
const BUCKET = 'engine-model';

const { db, database } = useTestDatabase({ poolMax: 4 });
/** Which faults bit, over all runs (printed at the end, as the ledger model prints its hits). */
const hits = new Map<string, number>();
const hit = (what: string, n = 1) => hits.set(what, (hits.get(what) ?? 0) + n);
const TALLIED = [
  'worker.lease.lost',
  'worker.execution.lease_lost',
  'worker.execution.released',
  'worker.execution.needs_review',
  'worker.settle.retried',
  'worker.artifact.orphaned',
];
let s3: EmbeddedS3;
let store: ObjectStore;

beforeAll(async () => {
  s3 = await startEmbeddedS3();
  store = new ObjectStore({
    endpoint: s3.endpoint,
    publicEndpoint: s3.endpoint,
    bucket: BUCKET,
    region: 'us-east-1',
    accessKeyId: s3.accessKeyId,
    secretAccessKey: s3.secretAccessKey,
  });
  await store.ensureBucket();
});

afterAll(async () => {
  store?.close();
  await s3?.stop();
});

interface Fault {
  atMs: number;
  kind: 'short_stall' | 'long_stall' | 'restart';
}
interface Scenario {
  executions: ModelStep[][];
  slowPuts: boolean;
  faults: Fault[];
}

/** Always run first: slow uploads and a short stall, nothing that may cost an attempt. */
const SLOW_UPLOADS: Scenario = {
  executions: [
    [{ ms: 50, file: true, external: false }],
    [
      { ms: 50, file: true, external: true },
      { ms: 50, file: true, external: false },
    ],
  ],
  slowPuts: true,
  faults: [{ atMs: 500, kind: 'short_stall' }],
};

const step = fc.record({ ms: fc.integer({ min: 100, max: 500 }), file: fc.boolean(), external: fc.boolean() });
const scenario: fc.Arbitrary<Scenario> = fc.record({
  executions: fc.array(fc.array(step, { minLength: 1, maxLength: 2 }), { minLength: 1, maxLength: 2 }),
  slowPuts: fc.boolean(),
  faults: fc.array(
    fc.record({ atMs: fc.integer({ min: 0, max: 1_000 }), kind: fc.constantFrom('short_stall' as const, 'long_stall' as const, 'restart' as const) }),
    {
      maxLength: 3,
    },
  ),
});

async function run(sc: Scenario): Promise<void> {
  const p = await seedProject(db, { creditMicros: 100_000 });
  const priceVersion = await modelPrices(db);
  const stack = new MiniStack({ db, databaseUrl: database.url, store, leaseTtlMs: LEASE_TTL_MS, artifactPutTimeoutMs: 20_000, concurrency: 2 });
  s3.delayObjectPuts(sc.slowPuts ? SLOW_PUT_MS : 0);
  const ids: string[] = [];
  try {
    await stack.start();
    for (const steps of sc.executions) ids.push(await submitModel(db, p, priceVersion, { steps }));
    for (const id of ids) stack.send({ executionId: id, projectId: p.projectId });
    const t0 = Date.now();
    for (const f of [...sc.faults].sort((a, b) => a.atMs - b.atMs)) {
      await sleep(Math.max(0, t0 + f.atMs - Date.now()));
      if (f.kind === 'restart') await stack.restart();
      else stack.stall(f.kind === 'short_stall' ? SHORT_STALL_MS : LONG_STALL_MS);
    }
    const by = Date.now() + 45_000;
    for (;;) {
      const open = await db('executions').whereIn('id', ids).whereIn('status', ['queued', 'running', 'waiting']).select('id', 'status', 'attempts');
      if (open.length === 0) break;
      if (Date.now() > by) throw new Error(`executions did not end within 45 s: ${JSON.stringify(open)}`);
      await sleep(100);
    }
  } finally {
    await stack.stop();
    s3.delayObjectPuts(0);
  }
  for (const r of stack.logs.records) if (TALLIED.includes(r.message as string)) hit(`${r.message as string}${r.reason ? `:${r.reason as string}` : ''}`);
  hit('faults.slow_puts', sc.slowPuts ? 1 : 0);
  for (const f of sc.faults) hit(`faults.${f.kind}`);
  await checkInvariants(sc, ids, p.projectId, stack);
}

/** The invariants after a run; every violation is listed (with the execution's facts) rather than the first. */
async function checkInvariants(sc: Scenario, ids: string[], projectId: string, stack: MiniStack): Promise<void> {
  const longStalls = sc.faults.filter((f) => f.kind === 'long_stall').length;
  const violations: string[] = [];
  const rows = await db('executions')
    .whereIn('id', ids)
    .select<{ id: string; status: string; attempts: number; reserved_micros: number; charged_micros: number; total_steps: number }[]>(
      'id',
      'status',
      'attempts',
      'reserved_micros',
      'charged_micros',
      'total_steps',
    );
  for (const e of rows) {
    const settlements = (await db('ledger_entries').where({ execution_id: e.id, kind: 'settle', account: 'charged' }).count<{ n: number }[]>({ n: '*' }))[0]!.n;
    const facts = JSON.stringify({ ...e, settlements, longStalls });
    if (e.charged_micros > e.reserved_micros) violations.push(`charged above its reservation: ${facts}`);
    if (e.status === 'succeeded') {
      if (settlements !== 1 || e.charged_micros !== e.total_steps * UNIT_MICROS) violations.push(`succeeded, not charged its steps exactly once: ${facts}`);
    } else if (e.status === 'needs_review') {
      if (settlements !== 0) violations.push(`needs_review but settled: ${facts}`);
      if (longStalls === 0) violations.push(`needs_review without a stall that could hide a provider reference: ${facts}`);
    } else violations.push(`ended ${e.status}, which no fault injected here may cause: ${facts}`);
    // an attempt is spent only to a lease lost for cause (defect 3: to every slow upload)
    if (e.attempts > longStalls) violations.push(`${e.attempts} attempts spent with ${longStalls} long stalls: ${facts}`);
  }
  for (const [step, creates] of stack.provider.creates) if (creates !== 1) violations.push(`provider step ${step} sent ${creates} times`);
  const named = (await db('artifacts').whereIn('execution_id', ids).select<{ storage_key: string }[]>('storage_key')).map((a) => a.storage_key).sort();
  const stored = (await bucketKeys(s3, BUCKET)).filter((k) => k.startsWith(`projects/${projectId}/`));
  for (const k of named) if (!stored.includes(k)) violations.push(`artifact row without its object: ${k}`);
  for (const k of stored) if (!named.includes(k)) violations.push(`object without an artifact row: ${k}`);
  for (const err of stack.thrown) violations.push(`the engine threw: ${String(err)}`);
  const audit = await auditLedger(db);
  if (!audit.ok) violations.push(`ledger audit: ${JSON.stringify(audit.problems)}`);
  expect(violations).toEqual([]);
}

test('the real StepEngine under slow uploads, stalled renewals and restarts: every execution ends, charged once, nothing orphaned, no attempt spent without cause', async () => {
  const seed = Number(process.env.ENGINE_MODEL_SEED ?? Date.now() % 2 ** 31);
  let runs = 0;
  const started = Date.now();
  try {
    await fc.assert(
      fc.asyncProperty(scenario, async (sc) => {
        runs += 1;
        await run(sc);
      }),
      { numRuns: Number(process.env.ENGINE_MODEL_RUNS ?? 5), seed, endOnFailure: true, examples: [[SLOW_UPLOADS]] },
    );
  } finally {
    console.log(
      `engine model: ${runs} runs in ${((Date.now() - started) / 1000).toFixed(1)} s, seed ${seed}\n${JSON.stringify(Object.fromEntries([...hits].sort()))}`,
    );
  }
}, 240_000);
