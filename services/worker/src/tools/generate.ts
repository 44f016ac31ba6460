import { StepError } from '@tes/core';
import { crashPoint } from '@tes/observability';
import type { PollResult, ProviderContext, ProviderOutput } from '../providers/common';
import type { StepContext, StepOutcome } from '../runner';

/** How a hosted model is driven: a queued job (create, then poll) or one synchronous call. */
export type HostedModel<Args> =
  | { kind: 'job'; create(p: ProviderContext, args: Args): Promise<string>; poll(p: ProviderContext, ref: string, args: Args): Promise<PollResult> }
  | { kind: 'call'; call(p: ProviderContext, args: Args): Promise<ProviderOutput[]> };

/**
 * The provider step shared by the generate tools. First run: create the job and record its
 * reference at once (before anything else can fail), then wait. Re-check: poll; not done yet
 * means wait again, until the job deadline (provider_timeout); done returns the outputs for
 * the tool to fetch and check. A synchronous model returns its outputs directly.
 */
export async function runHosted<Args>(ctx: StepContext, model: HostedModel<Args>, args: Args): Promise<ProviderOutput[] | StepOutcome> {
  const p: ProviderContext = { ...ctx.providers, signal: ctx.signal };
  if (model.kind === 'call') return model.call(p, args);
  if (ctx.externalRef === null) {
    const ref = await model.create(p, args);
    crashPoint('worker.provider.after_send');
    await ctx.recordExternalRef(ref, { submittedAt: Date.now() });
    return { wait: true };
  }
  const result = await model.poll(p, ctx.externalRef, args);
  if ('failed' in result) throw new StepError('provider_error', result.failed);
  if (!result.done) {
    const submittedAt = Number(ctx.stepCheckpoint?.submittedAt ?? 0);
    if (Date.now() - submittedAt > ctx.providers.jobTimeoutMs) {
      throw new StepError('provider_timeout', `the provider job did not finish within ${Math.round(ctx.providers.jobTimeoutMs / 1000)} s`);
    }
    return { wait: true };
  }
  return result.outputs;
}

/**
 * Picks the adapter for the execution's model and runs the provider step: the wait outcome
 * is returned as is, otherwise the provider's outputs for the tool to fetch and check.
 */
export async function runModel<Args extends { model: string }>(
  ctx: StepContext,
  models: Readonly<Record<string, HostedModel<Args>>>,
  args: Args,
): Promise<{ wait: StepOutcome } | { outputs: ProviderOutput[] }> {
  const model = models[args.model];
  if (!model) throw new StepError('internal_error', `no adapter for ${args.model}`);
  const outcome = await runHosted(ctx, model, args);
  return Array.isArray(outcome) ? { outputs: outcome } : { wait: outcome };
}
