import { DEFAULT_PRICE_LIST, type ToolDefinition } from '@tes/catalog';
import { newId, type ExecutionMessage } from '@tes/core';
import { auditLedger, getExecutionById, getSteps, publishPrices, submitExecution } from '@tes/db';
import { seedProject } from '@tes/testing';
import { StepEngine } from '../src/engine';
import type { AnyRunner } from '../src/runner';
import { engineDeps, useEngineStack } from './engine-deps';

/**
 * The engine at the start of a drain (stopClaiming, what a worker does on SIGTERM), driven
 * directly on a real database and S3: a message it is handed now is given back through the
 * delay queue, never claimed; a running execution ends the step it is running, records it, and
 * is given back before its next step, which another worker runs.
 */
const { db, store } = useEngineStack({ bucket: 'engine-drain', poolMax: 3 });

const twoSteps: ToolDefinition = {
  name: 'test.two',
  category: 'test',
  description: 'two billed steps',
  unit: 'step',
  inputSchema: { type: 'object' },
  example: {},
  models: [{ id: 'sleep', description: '', example: {}, available: true }],
  steps: ['step'],
  describePrice: () => '',
  estimateUnits: () => ({ units: 2 }),
  plan: () => [0, 1].map((i) => ({ name: 'step', label: `s${i}`, billed: true, timeoutMs: 30_000 })),
};

function engineFor(runner: AnyRunner, deferred: ExecutionMessage[]): StepEngine {
  return new StepEngine(
    engineDeps({ db, store }, twoSteps, runner, {
      workerId: 'wrk_drain',
      publishLater: async (message) => {
        deferred.push(message);
      },
    }),
  );
}

async function submitTwoSteps(key: string): Promise<{ id: string; projectId: string }> {
  const p = await seedProject(db, { creditMicros: 10_000 });
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
    reservedMicros: 2_000,
    idempotencyKey: key,
    requestDigest: 'x',
    dispatchDeadlineMs: 60_000,
  });
  return { id, projectId: p.projectId };
}

it('a message handed to a draining engine is given back through the delay queue, its execution not claimed', async () => {
  const { id, projectId } = await submitTwoSteps('drain-message-1');
  const deferred: ExecutionMessage[] = [];
  let ran = 0;
  const engine = engineFor({ step: () => ((ran += 1), Promise.resolve({ units: 1 })) }, deferred);
  engine.stopClaiming();
  expect(await engine.handle({ executionId: id, projectId }, 'test')).toBe('ack');
  expect(deferred).toEqual([{ executionId: id, projectId }]);
  expect(ran).toBe(0);
  expect(await getExecutionById(db, id)).toMatchObject({ status: 'queued', attempts: 0 });
  // the re-sent message is taken by a worker that is not draining
  const other = engineFor({ step: () => ((ran += 1), Promise.resolve({ units: 1 })) }, []);
  expect(await other.handle(deferred[0]!, 'test')).toBe('ack');
  expect(await getExecutionById(db, id)).toMatchObject({ status: 'succeeded', chargedMicros: 2_000 });
});

it('a drain that begins mid-step lets the step finish and be recorded, and starts no next step: the execution is given back', async () => {
  const { id, projectId } = await submitTwoSteps('drain-step-1');
  const deferred: ExecutionMessage[] = [];
  let started!: () => void;
  const stepStarted = new Promise<void>((r) => (started = r));
  let finish!: () => void;
  const stepMayEnd = new Promise<void>((r) => (finish = r));
  let ran = 0;
  const engine = engineFor(
    {
      step: async () => {
        ran += 1;
        started();
        await stepMayEnd;
        return { units: 1 };
      },
    },
    deferred,
  );
  const handled = engine.handle({ executionId: id, projectId }, 'test');
  await stepStarted;
  engine.stopClaiming();
  finish();
  expect(await handled).toBe('ack');
  expect(ran).toBe(1);
  const steps = await getSteps(db, projectId, [id]);
  expect(steps.map((s) => [s.index, s.status, s.attempts, s.costMicros])).toEqual([[0, 'succeeded', 1, 1_000]]);
  expect(await getExecutionById(db, id)).toMatchObject({ status: 'running', chargedMicros: 0 });
  expect((await db('executions').where({ id }).first()).lease_owner).toBeNull();
  expect(deferred).toEqual([{ executionId: id, projectId }]);

  // another worker resumes after the recorded step: the first is not run again
  const other = engineFor({ step: () => ((ran += 1), Promise.resolve({ units: 1 })) }, []);
  expect(await other.handle({ executionId: id, projectId }, 'test')).toBe('ack');
  expect(ran).toBe(2);
  expect(await getExecutionById(db, id)).toMatchObject({ status: 'succeeded', chargedMicros: 2_000 });
  expect((await getSteps(db, projectId, [id])).map((s) => s.attempts)).toEqual([1, 1]);
  expect((await auditLedger(db)).ok).toBe(true);
});
