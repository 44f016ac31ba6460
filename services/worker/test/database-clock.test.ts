import { DEFAULT_PRICE_LIST, type ToolDefinition } from '@tes/catalog';
import { newId, RETENTION_MS } from '@tes/core';
import { auditLedger, getExecutionById, getSteps, publishPrices, submitExecution } from '@tes/db';
import { seedProject, shiftDatabaseClock, type SeededProject } from '@tes/testing';
import { StepEngine } from '../src/engine';
import { ReadFailed, type PollResult } from '../src/providers/common';
import type { AnyRunner } from '../src/runner';
import { runModel, type HostedModel } from '../src/tools/generate';
import { engineDeps, noProviders, useEngineStack } from './engine-deps';

/**
 * Times the worker writes for another process to compare come from the database's clock
 * (issue #26 defect 8): a provider job's deadline and its next read, kept in the step's
 * checkpoint and compared on a later re-check (maybe by another worker), and an artifact's
 * expiry, which the janitor compares with tes_now(). Here the database's clock is moved
 * against the worker's (this process's), as two hosts' clocks disagree.
 */
const { db, store } = useEngineStack({ bucket: 'database-clock', poolMax: 3 });

beforeEach(async () => {
  await shiftDatabaseClock(db, '0');
});

const JOB_TIMEOUT_MS = 3_600_000;

function tool(name: string, external: boolean): ToolDefinition {
  return {
    name,
    category: 'test',
    description: 'a one-step test tool',
    unit: 'step',
    inputSchema: { type: 'object' },
    example: {},
    models: [{ id: 'fake', description: '', example: {}, available: true }],
    steps: ['generate'],
    describePrice: () => '',
    estimateUnits: () => ({ units: 1 }),
    plan: () => [{ name: 'generate', billed: true, external }],
  };
}

function engineFor(definition: ToolDefinition, runner: AnyRunner): StepEngine {
  // a waiting execution is handed back (the default publishLater refuses it); the test hands it in again itself
  return new StepEngine(engineDeps({ db, store }, definition, runner, { workerId: 'wrk_clock', providers: noProviders(JOB_TIMEOUT_MS) }));
}

async function submitted(p: SeededProject, toolName: string): Promise<string> {
  const { priceVersion } = await publishPrices(db, {
    ...DEFAULT_PRICE_LIST,
    tools: { ...DEFAULT_PRICE_LIST.tools, [toolName]: { models: { fake: { unitPriceMicros: 1_000, minimumMicros: 0 } } } },
  });
  const id = newId('exe');
  await submitExecution(db, {
    id,
    projectId: p.projectId,
    apiKeyId: p.keyId,
    tool: toolName,
    model: 'fake',
    category: 'test',
    arguments: { model: 'fake' },
    priceVersion,
    totalSteps: 1,
    reservedMicros: 1_000,
    idempotencyKey: `k-${id}`,
    requestDigest: 'x',
    dispatchDeadlineMs: 60_000,
  });
  return id;
}

/** A provider job model in process: each call is counted, each poll answers `poll(n)`. */
function fakeJob(poll: (n: number) => PollResult) {
  const calls = { create: 0, poll: 0, cancel: 0 };
  const model: HostedModel<{ model: string }> = {
    kind: 'job',
    create: () => Promise.resolve(`job-${++calls.create}`),
    poll: () => {
      const n = calls.poll++;
      return Promise.resolve(poll(n));
    },
    cancel: () => {
      calls.cancel++;
      return Promise.resolve('cancelled');
    },
  };
  const runner: AnyRunner = {
    generate: async (ctx, args: { model: string }) => {
      const ran = await runModel(ctx, { fake: model }, args, { max: 1, maxBytes: 1_000 });
      return 'wait' in ran ? ran.wait : { units: 1 };
    },
  };
  return { calls, runner };
}

it("a provider job's deadline is the database's: past it by the database's clock, the job is cancelled and the step fails", async () => {
  const p = await seedProject(db, { creditMicros: 10_000 });
  const job = fakeJob(() => ({ done: false }));
  const engine = engineFor(tool('test.deadline', true), job.runner);
  const id = await submitted(p, 'test.deadline');
  const message = { executionId: id, projectId: p.projectId };
  expect(await engine.handle(message, 'test')).toBe('ack');
  expect((await getExecutionById(db, id))?.status).toBe('waiting');
  // two hours later by the database's clock (the job's deadline is one hour); the worker's clock did not move
  await shiftDatabaseClock(db, '2 hours');
  expect(await engine.handle(message, 'test')).toBe('ack');
  expect(await getExecutionById(db, id)).toMatchObject({ status: 'failed', errorCode: 'provider_timeout', chargedMicros: 0 });
  expect(job.calls).toEqual({ create: 1, poll: 1, cancel: 1 });
  expect((await auditLedger(db)).ok).toBe(true);
});

it("a read's backoff ends by the database's clock: past the next read's time, the re-check reads the job again", async () => {
  const p = await seedProject(db, { creditMicros: 10_000 });
  // the first read fails with a minute's Retry-After; the next one works
  const job = fakeJob((n) => {
    if (n === 0) throw new ReadFailed('the provider did not answer', 60_000);
    return { done: false };
  });
  const engine = engineFor(tool('test.backoff', true), job.runner);
  const id = await submitted(p, 'test.backoff');
  const message = { executionId: id, projectId: p.projectId };
  expect(await engine.handle(message, 'test')).toBe('ack'); // created
  expect(await engine.handle(message, 'test')).toBe('ack'); // the read fails: the next one a minute later
  const [step] = await getSteps(db, p.projectId, [id]);
  expect(step!.checkpoint).toMatchObject({ failedReads: 1 });
  expect(job.calls.poll).toBe(1);
  // ten minutes later by the database's clock: well past the next read, well before the job's deadline
  await shiftDatabaseClock(db, '10 minutes');
  expect(await engine.handle(message, 'test')).toBe('ack');
  expect(job.calls.poll).toBe(2);
  expect((await getExecutionById(db, id))?.status).toBe('waiting');
  const [after] = await getSteps(db, p.projectId, [id]);
  expect(after!.checkpoint).not.toHaveProperty('failedReads'); // reads work again
});

it("an artifact expires the retention after the database's clock, in its row and in the execution's output alike", async () => {
  const p = await seedProject(db, { creditMicros: 10_000 });
  const runner: AnyRunner = { generate: () => Promise.resolve({ units: 1, files: [{ format: 'txt', mimeType: 'text/plain', body: Buffer.from('hello') }] }) };
  const engine = engineFor(tool('test.file', false), runner);
  const id = await submitted(p, 'test.file');
  // the database's clock 40 days behind the worker's
  await shiftDatabaseClock(db, '-40 days');
  expect(await engine.handle({ executionId: id, projectId: p.projectId }, 'test')).toBe('ack');
  const e = await getExecutionById(db, id);
  expect(e?.status).toBe('succeeded');
  const rows = await db('artifacts').where({ execution_id: id }).select<{ id: string; expires_at: Date }[]>('id', 'expires_at');
  expect(rows).toHaveLength(1);
  const { rows: clock } = await db.raw<{ rows: { now: Date }[] }>('SELECT tes_now() AS now');
  const expected = clock[0]!.now.getTime() + RETENTION_MS;
  // stamped within the last minute of the database's clock, not the worker's
  expect(Math.abs(rows[0]!.expires_at.getTime() - expected)).toBeLessThan(60_000);
  const output = e!.output as { artifacts: { id: string; expiresAt: string }[] };
  expect(output.artifacts).toEqual([expect.objectContaining({ id: rows[0]!.id, expiresAt: rows[0]!.expires_at.toISOString() })]);
  expect((await auditLedger(db)).ok).toBe(true);
});
