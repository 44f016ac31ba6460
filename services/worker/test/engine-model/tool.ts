import { setTimeout as sleep } from 'node:timers/promises';
import type { Knex } from 'knex';
import { Catalog, DEFAULT_PRICE_LIST, type ToolDefinition } from '@tes/catalog';
import { newId } from '@tes/core';
import { publishPrices, submitExecution } from '@tes/db';
import { createMetrics, createNullLogger } from '@tes/observability';
import { GuardedHttp } from '@tes/outbound';
import type { ObjectStore } from '@tes/storage';
import { StepEngine } from '../../src/engine';
import type { AnyRunner, StepContext, StepOutcome } from '../../src/runner';

/** One planned step of the model's tool: how long it works, whether it stores a file, whether it is a provider's. */
export interface ModelStep {
  ms: number;
  file: boolean;
  external: boolean;
}

export interface ModelArgs {
  steps: ModelStep[];
}

export const UNIT_MICROS = 1_000;

/** A tool whose plan is its arguments: every step billed one unit (UNIT_MICROS). */
export const MODEL_TOOL: ToolDefinition<ModelArgs> = {
  name: 'test.model',
  category: 'test',
  description: 'steps as the arguments say',
  unit: 'step',
  inputSchema: { type: 'object' },
  example: {},
  models: [{ id: 'm', description: '', example: {}, available: true }],
  steps: ['work'],
  describePrice: () => '',
  estimateUnits: (a) => ({ units: a.steps.length }),
  plan: (a) => a.steps.map((s, i) => ({ name: 'work', label: `work_${i}`, billed: true, ...(s.external ? { external: true } : {}) })),
};

/**
 * The provider the model's external steps call, kept by the test: a create is a job the provider
 * runs and bills, so one execution step must create at most one (the invariant "no provider step
 * sent twice"). A step re-run with its recorded reference polls the job instead.
 */
export class FakeProvider {
  readonly creates = new Map<string, number>();

  create(executionId: string, index: number): string {
    const key = `${executionId}/${index}`;
    this.creates.set(key, (this.creates.get(key) ?? 0) + 1);
    return `job-${key}-${this.creates.get(key)}`;
  }
}

export function modelRunner(provider: FakeProvider): AnyRunner {
  return {
    work: async (ctx: StepContext, args: ModelArgs): Promise<StepOutcome> => {
      const step = args.steps[ctx.index]!;
      if (step.external && ctx.externalRef === null) {
        // as a provider step does: create, then record the reference before anything else can fail
        await ctx.recordExternalRef(provider.create(ctx.logFields.executionId, ctx.index));
      }
      await sleep(step.ms, undefined, { signal: ctx.signal });
      const body = Buffer.from(`${ctx.logFields.executionId} step ${ctx.index}\n`);
      return { units: 1, ...(step.file ? { files: [{ format: 'txt', mimeType: 'text/plain', body }] } : {}) };
    },
  };
}

/** Publishes a price list with the model's tool at UNIT_MICROS a unit; returns its version. */
export async function modelPrices(db: Knex): Promise<string> {
  const { priceVersion } = await publishPrices(db, {
    ...DEFAULT_PRICE_LIST,
    tools: { ...DEFAULT_PRICE_LIST.tools, [MODEL_TOOL.name]: { models: { m: { unitPriceMicros: UNIT_MICROS, minimumMicros: 0 } } } },
  });
  return priceVersion;
}

/** Submits an execution of the model's tool reserving exactly what its steps cost. */
export async function submitModel(db: Knex, p: { projectId: string; keyId: string }, priceVersion: string, args: ModelArgs): Promise<string> {
  const id = newId('exe');
  const submitted = await submitExecution(db, {
    id,
    projectId: p.projectId,
    apiKeyId: p.keyId,
    tool: MODEL_TOOL.name,
    model: 'm',
    category: 'test',
    arguments: args as unknown as Record<string, unknown>,
    priceVersion,
    totalSteps: args.steps.length,
    reservedMicros: args.steps.length * UNIT_MICROS,
    idempotencyKey: `model-${id}`,
    requestDigest: 'x',
    dispatchDeadlineMs: 60_000,
  });
  if (submitted.kind !== 'created') throw new Error('the submit was refused');
  return id;
}

/**
 * A StepEngine running only the model's tool against `provider`, its lease long enough that no
 * renewal matters to a test; every execution it hands back is pushed to `resent`.
 */
export function modelEngine(o: { db: Knex; store: ObjectStore; provider: FakeProvider; workerId: string; resent: string[] }): StepEngine {
  return new StepEngine({
    db: o.db,
    catalog: new Catalog({ enableTestTools: true, extraTools: [MODEL_TOOL] }),
    store: o.store,
    runners: { [MODEL_TOOL.name]: modelRunner(o.provider) },
    logger: createNullLogger(),
    metrics: createMetrics('test', false),
    leaseTtlMs: 10_000,
    artifactPutTimeoutMs: 10_000,
    workerId: o.workerId,
    waitMs: 100,
    publishLater: (m) => {
      o.resent.push(m.executionId);
      return Promise.resolve();
    },
    providers: {
      http: new GuardedHttp({ allowPrivateNetworks: false }),
      baseUrls: { replicate: '', fal: '', openai: '' },
      credentials: {},
      jobTimeoutMs: 1_000,
    },
  });
}
