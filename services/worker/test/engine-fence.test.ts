import { DEFAULT_PRICE_LIST, type ToolDefinition } from '@tes/catalog';
import { newId, type ExecutionMessage } from '@tes/core';
import { auditLedger, getExecutionById, getSteps, publishPrices, reapExpiredLeases, submitExecution } from '@tes/db';
import { ObjectStore } from '@tes/storage';
import { seedProject, useTestDatabase } from '@tes/testing';
import { StepEngine } from '../src/engine';
import type { AnyRunner, StepContext } from '../src/runner';
import * as older from '../../../libs/db/test/previous-release/older-statements';
import { engineDeps } from './engine-deps';

/**
 * A stale run of an execution never writes after the execution was claimed again (issue #26,
 * defect 2). A worker whose renewals fail for longer than the TTL is reaped while its step still
 * runs, and the execution's message is published again. The engine that is still running it does
 * not start it a second time; and a run fenced by a lease that was claimed again (here a second
 * engine under the same worker id, as a restarted process with a reused id would be) writes
 * nothing: not the provider reference, not the step's end, not the settlement.
 *
 * And a claim after one by an older release's worker (whose claims did not count `claims`)
 * resumes after the steps that worker ran (defect 1): a provider step is never sent twice.
 */
const { db } = useTestDatabase({ poolMax: 4 });
let store: ObjectStore;

beforeAll(() => {
  // no step here stores a file: the store is never called
  store = new ObjectStore({
    endpoint: 'http://127.0.0.1:9',
    publicEndpoint: 'http://127.0.0.1:9',
    bucket: 'unused',
    region: 'us-east-1',
    accessKeyId: 'x',
    secretAccessKey: 'x',
  });
});

afterAll(() => {
  store?.close();
});

const gen: ToolDefinition = {
  name: 'test.gen',
  category: 'test',
  description: 'one provider step',
  unit: 'job',
  inputSchema: { type: 'object' },
  example: {},
  models: [{ id: 'sleep', description: '', example: {}, available: true }],
  steps: ['gen'],
  describePrice: () => '',
  estimateUnits: () => ({ units: 1 }),
  plan: () => [{ name: 'gen', external: true, billed: true }],
};

function engineFor(runner: AnyRunner, deferred: ExecutionMessage[], tool: ToolDefinition = gen): StepEngine {
  return new StepEngine(
    engineDeps({ db, store }, tool, runner, {
      // long: no renewal runs during a test (every third of it), so the expiry below is the test's own
      leaseTtlMs: 60_000,
      workerId: 'wrk_same',
      publishLater: async (message) => void deferred.push(message),
    }),
  );
}

function latch(): { promise: Promise<void>; open: () => void } {
  let open!: () => void;
  const promise = new Promise<void>((resolve) => (open = resolve));
  return { promise, open };
}

async function until(what: string, condition: () => boolean | Promise<boolean>, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function submitted(): Promise<ExecutionMessage> {
  const p = await seedProject(db, { creditMicros: 50_000 });
  const { priceVersion } = await publishPrices(db, {
    ...DEFAULT_PRICE_LIST,
    tools: { ...DEFAULT_PRICE_LIST.tools, 'test.gen': { models: { sleep: { unitPriceMicros: 1_000, minimumMicros: 0 } } } },
  });
  const id = newId('exe');
  await submitExecution(db, {
    id,
    projectId: p.projectId,
    apiKeyId: p.keyId,
    tool: 'test.gen',
    model: 'sleep',
    category: 'test',
    arguments: {},
    priceVersion,
    totalSteps: 1,
    reservedMicros: 1_000,
    idempotencyKey: id,
    requestDigest: 'x',
    dispatchDeadlineMs: 60_000,
  });
  return { executionId: id, projectId: p.projectId };
}

/** What the reaper does once the lease's renewals have failed past its TTL. */
async function leaseLostToTheReaper(id: string): Promise<void> {
  await db('executions')
    .where({ id })
    .update({ lease_expires_at: db.raw("tes_now() - interval '1 second'") });
  expect((await reapExpiredLeases(db, { limit: 100, maxAttempts: 5, redispatchMs: 60_000 })).leasesLost).toContain(id);
}

it('an engine does not start an execution it is already running when its message comes again', async () => {
  const message = await submitted();
  const gate = latch();
  const calls: (string | null)[] = [];
  const runner: AnyRunner = {
    gen: async (ctx: StepContext) => {
      calls.push(ctx.externalRef);
      await gate.promise;
      return { units: 1 };
    },
  };
  const deferred: ExecutionMessage[] = [];
  const engine = engineFor(runner, deferred);
  const first = engine.handle(message, 'test');
  try {
    await until('the step to run', () => calls.length === 1);
    await leaseLostToTheReaper(message.executionId);
    const second = engine.handle(message, 'test');
    // refused at once and sent to come back later; a second run would have claimed it again
    const claims = async () => (await db('executions').where({ id: message.executionId }).first()).claims as number;
    await until('the second message to be answered', async () => deferred.length > 0 || (await claims()) > 1);
    expect(await claims()).toBe(1);
    expect(calls).toHaveLength(1);
    expect(await second).toBe('ack');
    expect(deferred).toEqual([message]);
    expect(await db('executions').where({ id: message.executionId }).first()).toMatchObject({ claims: 1, lease_owner: null, status: 'running' });
  } finally {
    gate.open();
  }
  // the stale run's end is fenced out: nothing is recorded or charged, the execution waits for its next claim
  expect(await first).toBe('ack');
  expect(await getExecutionById(db, message.executionId)).toMatchObject({ status: 'running', leaseOwner: null, chargedMicros: 0 });
  expect((await auditLedger(db)).problems).toEqual([]);
});

it("a stale run under the same worker id cannot overwrite the current claim's provider reference, nor settle", async () => {
  const message = await submitted();
  const staleRecorded = latch();
  const staleGoesOn = latch();
  const currentResumed = latch();
  const currentGoesOn = latch();
  const seen: (string | null)[] = [];
  const runner: AnyRunner = {
    gen: async (ctx: StepContext) => {
      seen.push(ctx.externalRef);
      if (seen.length === 1) {
        await ctx.recordExternalRef('job-A');
        staleRecorded.open();
        await staleGoesOn.promise;
        // the stale run creates another job (a retry after a failed read, say) and records it
        await ctx.recordExternalRef('job-B');
        return { units: 1 };
      }
      currentResumed.open();
      await currentGoesOn.promise;
      return { units: 1 };
    },
  };
  const stale = engineFor(runner, []);
  const current = engineFor(runner, []);
  const staleRun = stale.handle(message, 'test');
  let currentRun: Promise<unknown> | undefined;
  try {
    await staleRecorded.promise;
    await leaseLostToTheReaper(message.executionId);
    currentRun = current.handle(message, 'test');
    await currentResumed.promise;
    expect(seen).toEqual([null, 'job-A']); // the current claim resumes the recorded job
    staleGoesOn.open();
    expect(await staleRun).toBe('ack'); // fenced out: LeaseLost
    const [step] = await getSteps(db, message.projectId, [message.executionId]);
    expect(step).toMatchObject({ status: 'running', externalRef: 'job-A' });
    expect(await getExecutionById(db, message.executionId)).toMatchObject({ status: 'running', chargedMicros: 0 });
  } finally {
    staleGoesOn.open();
    currentGoesOn.open();
  }
  expect(await currentRun).toBe('ack');
  expect(await getExecutionById(db, message.executionId)).toMatchObject({ status: 'succeeded', chargedMicros: 1_000 });
  expect(await db('ledger_entries').where({ execution_id: message.executionId, kind: 'settle' })).toHaveLength(3);
  expect((await auditLedger(db)).problems).toEqual([]);
});

it("an execution an older release's worker began is resumed after the step it ran, not run again", async () => {
  const twoSteps: ToolDefinition = {
    ...gen,
    name: 'test.gen2',
    steps: ['gen', 'finish'],
    plan: () => [
      { name: 'gen', external: true, billed: true },
      { name: 'finish', billed: true },
    ],
  };
  const p = await seedProject(db, { creditMicros: 50_000 });
  const { priceVersion } = await publishPrices(db, {
    ...DEFAULT_PRICE_LIST,
    tools: { ...DEFAULT_PRICE_LIST.tools, 'test.gen2': { models: { sleep: { unitPriceMicros: 1_000, minimumMicros: 0 } } } },
  });
  const id = newId('exe');
  await submitExecution(db, {
    id,
    projectId: p.projectId,
    apiKeyId: p.keyId,
    tool: 'test.gen2',
    model: 'sleep',
    category: 'test',
    arguments: {},
    priceVersion,
    totalSteps: 2,
    reservedMicros: 2_000,
    idempotencyKey: id,
    requestDigest: 'x',
    dispatchDeadlineMs: 60_000,
  });
  // the older worker: its claim, its provider step to the end, its hand-back (deadline NULL)
  expect(await older.claim(db, id, 'wrk_older', 60_000)).toEqual({ firstClaim: true });
  expect(await older.startStep(db, { executionId: id, projectId: p.projectId, index: 0, owner: 'wrk_older', external: true })).toBe(true);
  expect(await older.finishStep(db, { executionId: id, index: 0, owner: 'wrk_older', status: 'succeeded', costMicros: 1_000 })).toBe(true);
  expect(await older.releaseLease(db, id, 'wrk_older')).toBe(true);

  const calls: string[] = [];
  const runner: AnyRunner = {
    gen: async () => {
      calls.push('gen');
      return { units: 1 };
    },
    finish: async () => {
      calls.push('finish');
      return { units: 1 };
    },
  };
  const engine = engineFor(runner, [], twoSteps);
  expect(await engine.handle({ executionId: id, projectId: p.projectId }, 'test')).toBe('ack');
  expect(calls).toEqual(['finish']);
  expect(await getExecutionById(db, id)).toMatchObject({ status: 'succeeded', chargedMicros: 2_000 });
  expect((await getSteps(db, p.projectId, [id])).map((s) => [s.status, s.attempts])).toEqual([
    ['succeeded', 1],
    ['succeeded', 1],
  ]);
  expect((await auditLedger(db)).problems).toEqual([]);
});
