import { execFileSync } from 'node:child_process';
import { Catalog, DEFAULT_PRICE_LIST, type ToolDefinition } from '@tes/catalog';
import { newId } from '@tes/core';
import { auditLedger, getExecutionById, getSteps, publishPrices, submitExecution } from '@tes/db';
import { createLogger, createMetrics, type Logger, type Metrics } from '@tes/observability';
import { ObjectStore } from '@tes/storage';
import { CaptureTransport, seedProject } from '@tes/testing';
import { StepEngine } from '../src/engine';
import { runProgram } from '../src/programs';
import type { AnyRunner } from '../src/runner';
import { engineDeps, useEngineStack } from './engine-deps';

/**
 * The engine's own bounds, driven directly on a real database and S3: the 21st step fails
 * the execution with step_limit_exceeded (the catalog also refuses such input at quote
 * time, so this is the engine's last line), and a step's abort signal kills its program.
 */
const { db, store } = useEngineStack({ bucket: 'engine-limits', poolMax: 3 });

const manySteps: ToolDefinition = {
  name: 'test.many',
  category: 'test',
  description: 'a tool whose plan has 21 steps',
  unit: 'step',
  inputSchema: { type: 'object' },
  example: {},
  models: [{ id: 'sleep', description: '', example: {}, available: true }],
  steps: ['step'],
  describePrice: () => '',
  estimateUnits: () => ({ units: 21 }),
  plan: () => Array.from({ length: 21 }, (_, i) => ({ name: 'step', label: `s${i}`, billed: true })),
};

/** An engine for one extra tool, on the test's database and S3; nothing waits or is deferred here. */
function engineFor(
  tool: ToolDefinition,
  runner: AnyRunner,
  objectStore: ObjectStore,
  extra: { earlyAckAfterMs?: number; logger?: Logger; metrics?: Metrics } = {},
): StepEngine {
  return new StepEngine(engineDeps({ db, store: objectStore }, tool, runner, extra));
}

// one unit per step, at the 1,000 micros per unit the test prices publish
const oneThousandPerStep: AnyRunner = { step: () => Promise.resolve({ units: 1 }) };

it('the 21st step fails the execution with step_limit_exceeded, charging the 20 that ran', async () => {
  const p = await seedProject(db, { creditMicros: 50_000 });
  const { priceVersion } = await publishPrices(db, {
    ...DEFAULT_PRICE_LIST,
    tools: { ...DEFAULT_PRICE_LIST.tools, 'test.many': { models: { sleep: { unitPriceMicros: 1_000, minimumMicros: 0 } } } },
  });
  const id = newId('exe');
  await submitExecution(db, {
    id,
    projectId: p.projectId,
    apiKeyId: p.keyId,
    tool: 'test.many',
    model: 'sleep',
    category: 'test',
    arguments: {},
    priceVersion,
    totalSteps: 21,
    reservedMicros: 21_000,
    idempotencyKey: 'many-steps-1',
    requestDigest: 'x',

    dispatchDeadlineMs: 60_000,
  });
  const engine = engineFor(manySteps, oneThousandPerStep, store);
  expect(await engine.handle({ executionId: id, projectId: p.projectId }, 'test')).toBe('ack');
  const e = await getExecutionById(db, id);
  expect(e).toMatchObject({ status: 'failed', errorCode: 'step_limit_exceeded', chargedMicros: 20_000 });
  const steps = await getSteps(db, p.projectId, [id]);
  expect(steps).toHaveLength(20);
  expect(steps.every((s) => s.status === 'succeeded')).toBe(true);
  expect((await auditLedger(db)).ok).toBe(true);
});

it('work priced past the reservation is not charged, and the missed revenue is counted and logged', async () => {
  const twoSteps: ToolDefinition = { ...manySteps, name: 'test.two', plan: () => [0, 1].map((i) => ({ name: 'step', label: `s${i}`, billed: true })) };
  const p = await seedProject(db, { creditMicros: 50_000 });
  const { priceVersion } = await publishPrices(db, {
    ...DEFAULT_PRICE_LIST,
    tools: { ...DEFAULT_PRICE_LIST.tools, 'test.two': { models: { sleep: { unitPriceMicros: 1_000, minimumMicros: 0 } } } },
  });
  const id = newId('exe');
  await submitExecution(db, {
    id,
    projectId: p.projectId,
    apiKeyId: p.keyId,
    tool: 'test.two',
    model: 'sleep',
    category: 'test',
    arguments: {},
    priceVersion,
    totalSteps: 2,
    reservedMicros: 1_500, // a quote that was too low: two steps of 1,000 each
    idempotencyKey: 'capped-1',
    requestDigest: 'x',
    dispatchDeadlineMs: 60_000,
  });
  const capture = new CaptureTransport();
  const metrics = createMetrics('test', false);
  const engine = engineFor(twoSteps, oneThousandPerStep, store, { logger: createLogger({ service: 't', transports: [capture] }), metrics });
  expect(await engine.handle({ executionId: id, projectId: p.projectId }, 'test')).toBe('ack');
  expect(await getExecutionById(db, id)).toMatchObject({ status: 'succeeded', chargedMicros: 1_500 });
  expect((await metrics.cappedMicros.get()).values).toEqual([expect.objectContaining({ labels: { tool: 'test.two' }, value: 500 })]);
  const capped = capture.records.filter((r) => r.message === 'worker.step.cost_capped');
  expect(capped).toEqual([expect.objectContaining({ executionId: id, tool: 'test.two', costMicros: 1_000, chargedMicros: 500 })]);
  expect((await auditLedger(db)).ok).toBe(true);
});

it('the catalog refuses input whose plan has more than 20 steps before anything is reserved', () => {
  const catalog = new Catalog({ enableTestTools: true, extraTools: [manySteps] });
  expect(() => catalog.resolve('test.many', {})).toThrow(expect.objectContaining({ code: 'invalid_arguments' }));
});

it('an aborted step kills its program (SIGTERM, then SIGKILL if it ignores it)', async () => {
  const controller = new AbortController();
  // a child that ignores SIGTERM: only the SIGKILL after the grace can stop it
  const running = runProgram('bash', ['-c', 'trap "" TERM; sleep 31.7; echo done'], { signal: controller.signal, killGraceMs: 200 });
  await new Promise((r) => setTimeout(r, 300));
  const started = Date.now();
  controller.abort(new Error('deadline'));
  await expect(running).rejects.toThrow('deadline');
  expect(Date.now() - started).toBeLessThan(5_000);
  // the whole process group is gone, the program's own child included
  await new Promise((r) => setTimeout(r, 100));
  const ps = execFileSync('ps', ['-eo', 'args']).toString();
  expect(ps).not.toContain('sleep 31.7');
});

it('objects a fenced-out worker stored are deleted, not left in the bucket forever', async () => {
  const p = await seedProject(db, { creditMicros: 50_000 });
  const oneStep: ToolDefinition = { ...manySteps, name: 'test.one', steps: ['render'], plan: () => [{ name: 'render', billed: true }] };
  const { priceVersion } = await publishPrices(db, {
    ...DEFAULT_PRICE_LIST,
    tools: { ...DEFAULT_PRICE_LIST.tools, 'test.one': { models: { sleep: { unitPriceMicros: 1_000, minimumMicros: 0 } } } },
  });
  const id = newId('exe');
  await submitExecution(db, {
    id,
    projectId: p.projectId,
    apiKeyId: p.keyId,
    tool: 'test.one',
    model: 'sleep',
    category: 'test',
    arguments: {},
    priceVersion,
    totalSteps: 1,
    reservedMicros: 1_000,
    idempotencyKey: 'fenced-1',
    requestDigest: 'x',
    dispatchDeadlineMs: 60_000,
  });
  // The step's result is stored, but meanwhile its lease went to another worker (as the reaper
  // would hand it on after an expiry): the step's record is refused, so no row names the object.
  const stolen: AnyRunner = {
    render: async () => {
      await db('executions').where({ id }).update({ lease_owner: 'wrk_other' });
      return { units: 1, files: [{ body: Buffer.from('orphan?'), format: 'txt', mimeType: 'text/plain' }] };
    },
  };
  const keys: string[] = [];
  const recordingStore = Object.assign(Object.create(store) as ObjectStore, {
    put: async (o: Parameters<ObjectStore['put']>[0]) => {
      keys.push(o.key);
      return store.put(o);
    },
  });
  const engine = engineFor(oneStep, stolen, recordingStore);
  expect(await engine.handle({ executionId: id, projectId: p.projectId }, 'test')).toBe('ack');
  expect(keys).toHaveLength(1);
  await expect(store.get(keys[0]!)).rejects.toThrow();
  expect(await db('artifacts').where({ execution_id: id })).toHaveLength(0);
  expect(await getExecutionById(db, id)).toMatchObject({ status: 'running', leaseOwner: 'wrk_other' });
});

it("a long execution's message is acked after earlyAckAfterMs while it runs on, a short one's when it ends", async () => {
  const p = await seedProject(db, { creditMicros: 50_000 });
  const slow: ToolDefinition = { ...manySteps, name: 'test.slow', steps: ['wait'], plan: () => [{ name: 'wait' }] };
  const { priceVersion } = await publishPrices(db, {
    ...DEFAULT_PRICE_LIST,
    tools: { ...DEFAULT_PRICE_LIST.tools, 'test.slow': { models: { sleep: { unitPriceMicros: 0, minimumMicros: 0 } } } },
  });
  const events: string[] = [];
  const runner: AnyRunner = {
    wait: async (_ctx, { ms }: { ms: number }) => {
      await new Promise((r) => setTimeout(r, ms));
      events.push(`step done ${ms}`);
      return { units: 0 };
    },
  };
  const engine = engineFor(slow, runner, store, { earlyAckAfterMs: 300 });
  for (const ms of [1_000, 50]) {
    const id = newId('exe');
    await submitExecution(db, {
      id,
      projectId: p.projectId,
      apiKeyId: p.keyId,
      tool: 'test.slow',
      model: 'sleep',
      category: 'test',
      arguments: { ms },
      priceVersion,
      totalSteps: 1,
      reservedMicros: 0,
      idempotencyKey: `slow-${ms}`,
      requestDigest: 'x',
      dispatchDeadlineMs: 60_000,
    });
    const settled: string[] = [];
    const final = await engine.handle({ executionId: id, projectId: p.projectId }, 'test', {
      settle: (d) => settled.push(`${d} after ${events.length} steps`),
    });
    expect(final).toBe('ack');
    expect((await getExecutionById(db, id))?.status).toBe('succeeded');
    // 1 s run: acked at 300 ms, before its step ended; 50 ms run: never acked early (the consumer acks the final 'ack')
    expect(settled).toEqual(ms === 1_000 ? ['ack after 0 steps'] : []);
  }
});

it('a provider step that times out after its job was created goes to needs_review with the money held, not failed at zero', async () => {
  const p = await seedProject(db, { creditMicros: 50_000 });
  const external: ToolDefinition = {
    ...manySteps,
    name: 'test.external',
    steps: ['generate'],
    plan: () => [{ name: 'generate', billed: true, external: true, timeoutMs: 300 }],
  };
  const { priceVersion } = await publishPrices(db, {
    ...DEFAULT_PRICE_LIST,
    tools: { ...DEFAULT_PRICE_LIST.tools, 'test.external': { models: { sleep: { unitPriceMicros: 4_000, minimumMicros: 0 } } } },
  });
  // created at the provider (its reference recorded), then no answer before the step's deadline
  const hangs = (created: boolean): AnyRunner => ({
    generate: async (ctx) => {
      if (created) await ctx.recordExternalRef('job-123');
      await new Promise((_, reject) => ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason), { once: true }));
      return { units: 0 };
    },
  });
  for (const created of [true, false]) {
    const id = newId('exe');
    await submitExecution(db, {
      id,
      projectId: p.projectId,
      apiKeyId: p.keyId,
      tool: 'test.external',
      model: 'sleep',
      category: 'test',
      arguments: {},
      priceVersion,
      totalSteps: 1,
      reservedMicros: 4_000,
      idempotencyKey: `external-${created}`,
      requestDigest: 'x',
      dispatchDeadlineMs: 60_000,
    });
    expect(await engineFor(external, hangs(created), store).handle({ executionId: id, projectId: p.projectId }, 'test')).toBe('ack');
    const e = await getExecutionById(db, id);
    expect(e).toMatchObject(
      created
        ? { status: 'needs_review', errorCode: 'provider_outcome_unknown', chargedMicros: 0 } // reservation held for the operator
        : { status: 'failed', errorCode: 'step_timeout', chargedMicros: 0 },
    ); // nothing was sent: nothing can have cost money
  }
  const held = await db('projects').where({ id: p.projectId }).first();
  expect(held.reserved_micros).toBe(4_000);
});
