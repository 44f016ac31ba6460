import { builtinTools, DEFAULT_PRICE_LIST, type ModelPrice, type ToolDefinition } from '@tes/catalog';
import { newId, StepError } from '@tes/core';
import { auditLedger, getExecutionById, getSteps, publishPrices, recordUpload, submitExecution } from '@tes/db';
import { ObjectStore } from '@tes/storage';
import { seedProject, startTcpRelay } from '@tes/testing';
import { StepEngine } from '../src/engine';
import { SharpSandbox } from '../src/media/sharp-sandbox';
import type { AnyRunner } from '../src/runner';
import { RUNNERS } from '../src/tools';
import { engineDeps, useEngineStack } from './engine-deps';

/**
 * A step that runs out of its deadline on its own work is not free (issue #25, item 4): 4
 * heavy-but-valid SVG renders each held a worker slot for their 60 s and were charged 0, so a
 * key could repeat them at no cost. Now such a step costs every started second of its deadline
 * at the model's timeout rate, capped at what remains of the reservation; every other failure
 * stays free. Driven on the real engine, Postgres, S3 and the sharp sandbox.
 */
const sandbox = new SharpSandbox();

// declared before the stack's hooks, so that it runs while the database is still there
afterAll(async () => {
  expect((await auditLedger(db)).ok).toBe(true);
  await sandbox.stop();
});

const { db, s3, store } = useEngineStack({ bucket: 'timeout-charge', poolMax: 3 });

/** A tool of our own compute: `steps` steps of one unit each, the last one `lastTimeoutMs` long. */
function ownTool(steps: number, lastTimeoutMs: number): ToolDefinition {
  return {
    name: 'test.own',
    category: 'test',
    description: 'a tool whose steps run on the worker',
    unit: 'step',
    inputSchema: { type: 'object' },
    example: {},
    models: [{ id: 'own', description: '', example: {}, available: true }],
    steps: ['step'],
    describePrice: () => '',
    estimateUnits: () => ({ units: steps }),
    plan: () => Array.from({ length: steps }, (_, i) => ({ name: 'step', label: `s${i}`, billed: true, timeoutMs: i === steps - 1 ? lastTimeoutMs : 10_000 })),
  };
}

/** image.render as shipped, with a 1 s deadline instead of its 60 s (the same runner, the real sandbox). */
const shortRender: ToolDefinition = {
  ...builtinTools({ replicate: false, fal: false, openai: false })['image.render'],
  plan: () => [{ name: 'render', billed: true, timeoutMs: 1_000 }],
};

function engineFor(tool: ToolDefinition, runner: AnyRunner, objectStore: ObjectStore = store): StepEngine {
  return new StepEngine(engineDeps({ db, store: objectStore }, tool, runner, { sandbox }));
}

async function pricesWith(tool: string, model: string, price: ModelPrice): Promise<string> {
  const { priceVersion } = await publishPrices(db, { ...DEFAULT_PRICE_LIST, tools: { ...DEFAULT_PRICE_LIST.tools, [tool]: { models: { [model]: price } } } });
  return priceVersion;
}

/** Submits (reserving `reservedMicros`) and runs one execution to its end on `engine`. */
async function submitAndRun(
  engine: StepEngine,
  p: { projectId: string; keyId: string },
  e: { tool: string; model: string; arguments?: Record<string, unknown>; priceVersion: string; totalSteps: number; reservedMicros: number; fileIds?: string[] },
) {
  const id = newId('exe');
  await submitExecution(db, {
    id,
    projectId: p.projectId,
    apiKeyId: p.keyId,
    tool: e.tool,
    model: e.model,
    category: e.tool.split('.')[0]!,
    arguments: e.arguments ?? {},
    priceVersion: e.priceVersion,
    totalSteps: e.totalSteps,
    reservedMicros: e.reservedMicros,
    idempotencyKey: id,
    requestDigest: 'x',
    dispatchDeadlineMs: 60_000,
    fileIds: e.fileIds ?? [],
  });
  expect(await engine.handle({ executionId: id, projectId: p.projectId }, e.tool.split('.')[0]!)).toBe('ack');
  return { execution: (await getExecutionById(db, id))!, steps: await getSteps(db, p.projectId, [id]) };
}

async function balance(projectId: string): Promise<{ available: number; reserved: number }> {
  const row = await db('projects').where({ id: projectId }).first('available_micros', 'reserved_micros');
  return { available: Number(row.available_micros), reserved: Number(row.reserved_micros) };
}

/** A step that never ends by itself: it stops only when its signal aborts. */
const hangs = (ctx: { signal: AbortSignal }) =>
  new Promise<never>((_, reject) => ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason), { once: true }));

it('a step that runs out of its deadline is charged every started second of it at the timeout rate, the rest released', async () => {
  const p = await seedProject(db, { creditMicros: 50_000 });
  const priceVersion = await pricesWith('test.own', 'own', { unitPriceMicros: 1_000, minimumMicros: 0, timeoutMicrosPerSecond: 700 });
  // 1,500 ms: two started seconds at 700 micros
  const { execution, steps } = await submitAndRun(engineFor(ownTool(1, 1_500), { step: hangs }), p, {
    tool: 'test.own',
    model: 'own',
    priceVersion,
    totalSteps: 1,
    reservedMicros: 5_000,
  });
  expect(execution).toMatchObject({ status: 'failed', errorCode: 'step_timeout', reservedMicros: 5_000, chargedMicros: 1_400 });
  expect(steps).toMatchObject([{ index: 0, status: 'failed', errorCode: 'step_timeout', costMicros: 1_400 }]);
  expect(await balance(p.projectId)).toEqual({ available: 50_000 - 1_400, reserved: 0 });
  const journal = await db('ledger_entries').where({ execution_id: execution.id, kind: 'settle' }).select('account', 'amount_micros');
  expect(Object.fromEntries(journal.map((r: { account: string; amount_micros: string }) => [r.account, Number(r.amount_micros)]))).toEqual({
    reserved: -5_000,
    available: 3_600,
    charged: 1_400,
  });
  expect((await auditLedger(db)).ok).toBe(true);
});

it('the charge never exceeds the reservation: capped at what remains of it after the steps before', async () => {
  const p = await seedProject(db, { creditMicros: 50_000 });
  // one started second at 4,000 micros; 5,000 reserved
  const priceVersion = await pricesWith('test.own', 'own', { unitPriceMicros: 3_000, minimumMicros: 0, timeoutMicrosPerSecond: 4_000 });
  let calls = 0;
  const firstSucceedsThenHangs: AnyRunner = { step: (ctx) => (calls++ === 0 ? Promise.resolve({ units: 1 }) : hangs(ctx)) };
  // the first step costs 3,000, so the timed-out second may cost only the 2,000 left
  const twoSteps = await submitAndRun(engineFor(ownTool(2, 300), firstSucceedsThenHangs), p, {
    tool: 'test.own',
    model: 'own',
    priceVersion,
    totalSteps: 2,
    reservedMicros: 5_000,
  });
  expect(twoSteps.execution).toMatchObject({ status: 'failed', errorCode: 'step_timeout', reservedMicros: 5_000, chargedMicros: 5_000 });
  expect(twoSteps.steps.map((s) => [s.status, s.costMicros])).toEqual([
    ['succeeded', 3_000],
    ['failed', 2_000],
  ]);
  // alone, 4,000 of a 2,500 reservation: 2,500
  const alone = await submitAndRun(engineFor(ownTool(1, 300), { step: hangs }), p, {
    tool: 'test.own',
    model: 'own',
    priceVersion,
    totalSteps: 1,
    reservedMicros: 2_500,
  });
  expect(alone.execution).toMatchObject({ status: 'failed', errorCode: 'step_timeout', chargedMicros: 2_500 });
  expect(alone.steps[0]).toMatchObject({ status: 'failed', costMicros: 2_500 });
  expect(await balance(p.projectId)).toEqual({ available: 50_000 - 5_000 - 2_500, reserved: 0 });
  expect((await auditLedger(db)).ok).toBe(true);
});

it('every other failure stays free: a step error, a provider step that timed out, a rate of 0', async () => {
  const p = await seedProject(db, { creditMicros: 50_000 });
  const priceVersion = await pricesWith('test.own', 'own', { unitPriceMicros: 1_000, minimumMicros: 0, timeoutMicrosPerSecond: 1_000 });
  const run = (tool: ToolDefinition, runner: AnyRunner, version = priceVersion) =>
    submitAndRun(engineFor(tool, runner), p, { tool: 'test.own', model: 'own', priceVersion: version, totalSteps: 1, reservedMicros: 3_000 });
  // the input was bad: the step failed at once
  const failed = await run(ownTool(1, 300), { step: () => Promise.reject(new StepError('invalid_input_file', 'not an image')) });
  expect(failed.execution).toMatchObject({ status: 'failed', errorCode: 'invalid_input_file', chargedMicros: 0 });
  expect(failed.steps[0]).toMatchObject({ status: 'failed', costMicros: 0 });
  // a provider step (nothing sent: no job reference) ran out of its deadline waiting on the provider
  const provider = { ...ownTool(1, 300), plan: () => [{ name: 'step', billed: true, external: true, timeoutMs: 300 }] };
  const waited = await run(provider, { step: hangs });
  expect(waited.execution).toMatchObject({ status: 'failed', errorCode: 'step_timeout', chargedMicros: 0 });
  // an operator made timeouts of this model free
  const free = await pricesWith('test.own', 'own', { unitPriceMicros: 1_000, minimumMicros: 0, timeoutMicrosPerSecond: 0 });
  const freeTimeout = await run(ownTool(1, 300), { step: hangs }, free);
  expect(freeTimeout.execution).toMatchObject({ status: 'failed', errorCode: 'step_timeout', chargedMicros: 0 });
  expect(await balance(p.projectId)).toEqual({ available: 50_000, reserved: 0 });
});

it('a deadline that runs out while the worker still fetches an input from our storage is ours: free', async () => {
  const p = await seedProject(db, { creditMicros: 50_000 });
  const priceVersion = await pricesWith('test.own', 'own', { unitPriceMicros: 1_000, minimumMicros: 0, timeoutMicrosPerSecond: 1_000 });
  const storageKey = `uploads/${p.projectId}/input.png`;
  await store.put({ key: storageKey, body: Buffer.from('not really a png'), contentType: 'image/png' });
  const { file } = await recordUpload(db, {
    projectId: p.projectId,
    sha256: 'a'.repeat(64),
    format: 'png',
    mimeType: 'image/png',
    sizeBytes: 16,
    storageKey,
    retentionMs: 60_000,
  });
  // S3 answers nothing: the download outlasts the step's deadline
  const relay = await startTcpRelay(s3.endpoint, 80);
  const stalled = new ObjectStore({
    endpoint: relay.url,
    publicEndpoint: relay.url,
    bucket: 'timeout-charge',
    region: 'us-east-1',
    accessKeyId: s3.accessKeyId,
    secretAccessKey: s3.secretAccessKey,
  });
  relay.holdAnswers(true);
  try {
    const fetches: AnyRunner = {
      step: async (ctx, args) => {
        await ctx.inputFile((args as { fileId: string }).fileId);
        return { units: 1 };
      },
    };
    const { execution } = await submitAndRun(engineFor(ownTool(1, 500), fetches, stalled), p, {
      tool: 'test.own',
      model: 'own',
      arguments: { fileId: file.id },
      priceVersion,
      totalSteps: 1,
      reservedMicros: 3_000,
      fileIds: [file.id],
    });
    expect(execution).toMatchObject({ status: 'failed', errorCode: 'step_timeout', chargedMicros: 0 });
    expect(await balance(p.projectId)).toEqual({ available: 50_000, reserved: 0 });
  } finally {
    stalled.close();
    await relay.close();
  }
});

it('heavy renders that time out again and again drain the project that sends them, until it cannot submit more', async () => {
  // a 2048 px SVG whose filters take far longer than the 1 s deadline: 5 started megapixels, 5,000 reserved
  const heavy =
    '<svg xmlns="http://www.w3.org/2000/svg" width="2048" height="2048"><filter id="f"><feTurbulence baseFrequency="0.01" numOctaves="10"/>' +
    '<feGaussianBlur stdDeviation="40"/><feMorphology operator="dilate" radius="20"/></filter><rect width="2048" height="2048" filter="url(#f)"/></svg>';
  const p = await seedProject(db, { creditMicros: 14_000 });
  // 1 s of deadline at 3,000 micros a second
  const priceVersion = await pricesWith('image.render', 'sharp', { unitPriceMicros: 1_000, minimumMicros: 1_000, timeoutMicrosPerSecond: 3_000 });
  const engine = engineFor(shortRender, RUNNERS['image.render']);
  const args = { model: 'sharp', svg: heavy, format: 'png', quality: 90, background: '#ffffff', color: '#111111', fontSize: 64 };
  for (let n = 1; n <= 4; n++) {
    const { execution, steps } = await submitAndRun(engine, p, {
      tool: 'image.render',
      model: 'sharp',
      arguments: args,
      priceVersion,
      totalSteps: 1,
      reservedMicros: 5_000,
    });
    expect(execution).toMatchObject({ status: 'failed', errorCode: 'step_timeout', chargedMicros: 3_000 });
    expect(steps[0]).toMatchObject({ name: 'render', status: 'failed', costMicros: 3_000 });
    expect(await balance(p.projectId)).toEqual({ available: 14_000 - n * 3_000, reserved: 0 });
  }
  // 2,000 left: the fifth is refused before anything runs (the abuse cost the abuser its balance)
  await expect(
    submitExecution(db, {
      id: newId('exe'),
      projectId: p.projectId,
      apiKeyId: p.keyId,
      tool: 'image.render',
      model: 'sharp',
      category: 'image',
      arguments: args,
      priceVersion,
      totalSteps: 1,
      reservedMicros: 5_000,
      idempotencyKey: 'fifth',
      requestDigest: 'x',
      dispatchDeadlineMs: 60_000,
    }),
  ).rejects.toMatchObject({ code: 'insufficient_balance' });
  expect((await auditLedger(db)).ok).toBe(true);
}, 30_000);
