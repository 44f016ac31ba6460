import { StepError } from '@tes/core';
import { crashPoint } from '@tes/lifecycle';
import { fetchOutput, ReadFailed, type FetchedOutput, type PollResult, type ProviderContext, type ProviderOutput } from '../providers/common';
import { backoffDelayMs } from '@tes/outbound';
import { OutcomeUnknown } from '../outcome-unknown';
import type { ProviderUsage } from '@tes/catalog';
import type { StepContext, StepWait } from '../runner';

/** How a hosted model is driven: a queued job (create, then poll) or one synchronous call. */
export type HostedModel<Args> =
  | {
      kind: 'job';
      create(p: ProviderContext, args: Args): Promise<string>;
      poll(p: ProviderContext, ref: string, args: Args): Promise<PollResult>;
      /** Stops the job at its deadline: 'cancelled' (taken), 'finished' (it had ended: poll again). */
      cancel(p: ProviderContext, ref: string, args: Args): Promise<'cancelled' | 'finished'>;
    }
  | { kind: 'call'; call(p: ProviderContext, args: Args): Promise<CallResult> };

/** A synchronous model's answer: its output files, and what it reported it billed, if it did. */
export interface CallResult {
  outputs: ProviderOutput[];
  usage?: ProviderUsage;
}

/** What the provider step delivered: the fetched files, and the provider's usage report. */
interface Delivered {
  files: FetchedOutput[];
  usage?: ProviderUsage;
}

/** Which of the provider's output files the tool keeps, and how large one may be. */
export interface OutputLimits {
  max: number;
  maxBytes: number;
}

/**
 * What the step keeps in its checkpoint, next to the job's reference. `failedReads` and
 * `nextReadAt` are there only while reads of the job fail: re-checks before `nextReadAt`
 * make no request, so an outage at the provider is met with backoff, not with a poll every
 * re-check. The times are the database's clock (ctx.databaseNow()), in ms: the re-check that
 * compares them may run on another worker, whose own clock may be minutes off this one's.
 */
interface JobCheckpoint {
  submittedAt: number;
  failedReads?: number;
  nextReadAt?: number;
}

const WAIT: StepWait = { wait: true };

/**
 * The provider step shared by the generate tools. First run: create the job and record its
 * reference at once (before anything else can fail), then wait. Re-check: poll; not done yet
 * means wait again, until the job deadline (provider_timeout); done fetches the outputs for
 * the tool to check. A synchronous model's outputs are fetched directly.
 *
 * Once the job exists, only the provider's own word decides its outcome: a definitive
 * failure fails the step, a success delivers the files. A read that gets no answer (status,
 * result or output file) means the job may still run and bill us, so the step keeps waiting,
 * backing off, until the job deadline; past it the execution goes to needs_review with its
 * reservation held, never to failed at zero charge.
 */
async function runHosted<Args>(ctx: StepContext, model: HostedModel<Args>, args: Args, limits: OutputLimits): Promise<Delivered | StepWait> {
  const p: ProviderContext = { ...ctx.providers, signal: ctx.signal };
  if (model.kind === 'call') {
    const { outputs, usage } = await model.call(p, args);
    try {
      return { files: await fetchAll(p, outputs, limits), ...(usage ? { usage } : {}) };
    } catch (err) {
      // The call answered, so it ran and is billed; with no reference there is nothing to
      // wait on.
      if (err instanceof ReadFailed && !ctx.signal.aborted) throw new OutcomeUnknown(`the provider's output could not be fetched: ${err.message}`);
      throw err;
    }
  }
  if (ctx.externalRef === null) {
    // read before the create (nothing more between it and the reference's record): the
    // deadline counts from no later than the job's creation
    const submittedAt = await ctx.databaseNow();
    const ref = await model.create(p, args);
    crashPoint('worker.provider.after_send');
    await ctx.recordExternalRef(ref, { submittedAt } satisfies JobCheckpoint);
    return WAIT;
  }
  const files = await recheck(ctx, p, model, ctx.externalRef, args, limits);
  return Array.isArray(files) ? { files } : files;
}

async function recheck<Args>(
  ctx: StepContext,
  p: ProviderContext,
  model: Extract<HostedModel<Args>, { kind: 'job' }>,
  ref: string,
  args: Args,
  limits: OutputLimits,
): Promise<FetchedOutput[] | StepWait> {
  const job = jobCheckpoint(ctx.stepCheckpoint);
  const deadline = job.submittedAt + ctx.providers.jobTimeoutMs;
  // At or past the deadline, one last read is always made before giving up.
  if ((await ctx.databaseNow()) < Math.min(job.nextReadAt ?? 0, deadline)) return WAIT;
  try {
    const result = await model.poll(p, ref, args);
    if ('failed' in result) throw new StepError('provider_error', result.failed);
    if (result.done) return await fetchAll(p, result.outputs, limits);
    if ((await ctx.databaseNow()) > deadline) {
      // Past its deadline the job is cancelled before the step fails: left running, it could
      // finish and be billed while the caller is charged nothing. If the provider says it had
      // ended meanwhile, its outcome counts; if the cancel gets no answer, the outcome is
      // unknown (the catch below: needs_review).
      if ((await model.cancel(p, ref, args)) === 'finished') {
        const ended = await model.poll(p, ref, args);
        if ('failed' in ended) throw new StepError('provider_error', ended.failed);
        if (ended.done) return await fetchAll(p, ended.outputs, limits);
        throw new ReadFailed('the provider said the job had ended, then reported it running');
      }
      throw new StepError('provider_timeout', `the provider job did not finish within ${Math.round(ctx.providers.jobTimeoutMs / 1000)} s and was cancelled`);
    }
    // Reads work again: back to a read on every re-check.
    if (job.failedReads) await ctx.recordExternalRef(ref, { submittedAt: job.submittedAt } satisfies JobCheckpoint);
    return WAIT;
  } catch (err) {
    if (!(err instanceof ReadFailed) || ctx.signal.aborted) throw err;
    const failedReads = (job.failedReads ?? 0) + 1;
    const now = await ctx.databaseNow();
    if (now >= deadline) {
      throw new OutcomeUnknown(
        `the provider job could not be read before its deadline (${failedReads} failed ${failedReads === 1 ? 'read' : 'reads'} in a row, the last: ${err.message})`,
      );
    }
    const nextReadAt = now + readBackoffMs(failedReads, err.retryAfterMs, ctx.providers.jobTimeoutMs);
    ctx.logger.warn('worker.provider.read_failed', {
      ...ctx.logFields,
      step: ctx.index,
      failedReads,
      nextReadAt: new Date(nextReadAt).toISOString(),
      reason: err.message,
    });
    await ctx.recordExternalRef(ref, { submittedAt: job.submittedAt, failedReads, nextReadAt } satisfies JobCheckpoint);
    return WAIT;
  }
}

/**
 * Delay before the next read after `failedReads` failed ones: exponential with full jitter
 * from 1 s, capped at a minute and at a tenth of the job's time (so a short deadline still
 * gets several reads), and never shorter than the provider's Retry-After within that cap.
 */
function readBackoffMs(failedReads: number, retryAfterMs: number | undefined, jobTimeoutMs: number): number {
  const cap = Math.min(60_000, jobTimeoutMs / 10);
  return Math.max(backoffDelayMs(failedReads - 1, Math.min(1_000, cap), cap), Math.min(retryAfterMs ?? 0, cap));
}

function jobCheckpoint(cp: Record<string, unknown> | null): JobCheckpoint {
  const num = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) ? v : undefined);
  return { submittedAt: num(cp?.submittedAt) ?? 0, failedReads: num(cp?.failedReads), nextReadAt: num(cp?.nextReadAt) };
}

async function fetchAll(p: ProviderContext, outputs: ProviderOutput[], limits: OutputLimits): Promise<FetchedOutput[]> {
  const files: FetchedOutput[] = [];
  for (const output of outputs.slice(0, limits.max)) files.push(await fetchOutput(p, output, limits.maxBytes));
  return files;
}

/**
 * Picks the adapter for the execution's model and runs the provider step: the wait outcome
 * is returned as is, otherwise the fetched output files for the tool to check.
 */
export async function runModel<Args extends { model: string }>(
  ctx: StepContext,
  models: Readonly<Record<string, HostedModel<Args>>>,
  args: Args,
  limits: OutputLimits,
): Promise<{ wait: StepWait } | Delivered> {
  const model = models[args.model];
  if (!model) throw new StepError('internal_error', `no adapter for ${args.model}`);
  const outcome = await runHosted(ctx, model, args, limits);
  return 'wait' in outcome ? { wait: outcome } : outcome;
}
