import { backoffDelayMs, StepError } from '@tes/core';
import { crashPoint } from '@tes/lifecycle';
import { CreateRefused, fetchOutput, ReadFailed, type FetchedOutput, type PollResult, type ProviderContext, type ProviderOutput } from '../providers/common';
import { OutcomeUnknown } from '../outcome-unknown';
import type { ProviderUsage } from '@tes/catalog';
import type { StepContext, StepWait } from '../runner';

/** How a hosted model is driven: a queued job (create, then poll) or one synchronous call. */
export type HostedModel<Args> =
  | {
      kind: 'job';
      create(p: ProviderContext, args: Args): Promise<string>;
      poll(p: ProviderContext, ref: string, args: Args): Promise<PollResult>;
      /**
       * Stops the job at its deadline: 'cancelled' (taken: it stops, billing nothing more),
       * 'requested' (the provider only signalled the running model, which may still deliver:
       * poll on), 'finished' (it had ended: poll again).
       */
      cancel(p: ProviderContext, ref: string, args: Args): Promise<'cancelled' | 'requested' | 'finished'>;
      /** The provider's own ceiling on a job's time (Replicate deletes outputs after an hour). */
      maxJobMs?: number;
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
 * re-check. `cancelRequestedAt`: the job ran past its deadline and the provider was asked to
 * stop it, which it may not (fal). The times are the database's clock (ctx.databaseNow()), in
 * ms: the re-check that compares them may run on another worker, whose own clock may be
 * minutes off this one's.
 */
interface JobCheckpoint {
  submittedAt: number;
  failedReads?: number;
  nextReadAt?: number;
  cancelRequestedAt?: number;
}

/**
 * What the step keeps while the provider refuses the create (429, 503: nothing taken), with no
 * reference: when it first tried (the job's deadline counts from it), when to send again, and
 * how many times it was refused.
 */
interface UnsentCheckpoint {
  submittedAt: number;
  createAfter: number;
  refusals: number;
}

const WAIT: StepWait = { wait: true };

/**
 * The provider step shared by the generate tools. First run: create the job and record its
 * reference at once (before anything else can fail), then wait. Re-check: poll; not done yet
 * means wait again, until the job deadline (provider_timeout); done fetches the outputs for
 * the tool to check. A synchronous model's outputs are fetched directly.
 *
 * A create the provider refuses (429, 503: nothing was taken) is sent again later: the step
 * records that nothing was taken and waits, its consumer slot free, until the provider's
 * Retry-After, within the job's deadline counted from the first try; still refused then, it
 * fails (provider_error), unbilled.
 *
 * Once the job exists, only the provider's own word decides its outcome: a definitive
 * failure fails the step, a success delivers the files. A read that gets no answer (status,
 * result or output file) means the job may still run and bill us, so the step keeps waiting,
 * backing off, until the job deadline; past it the execution goes to needs_review with its
 * reservation held, never to failed at zero charge.
 */
async function runHosted<Args>(ctx: StepContext, model: HostedModel<Args>, args: Args, limits: OutputLimits): Promise<Delivered | StepWait> {
  const p: ProviderContext = { ...ctx.providers, signal: ctx.signal };
  if (ctx.externalRef !== null && model.kind === 'job') return delivered(await recheck(ctx, p, model, ctx.externalRef, args, limits));
  const unsent = unsentCheckpoint(ctx.stepCheckpoint);
  // read before the create (nothing more between it and the reference's record): the
  // deadline counts from no later than the job's creation
  const now = await ctx.databaseNow();
  const submittedAt = unsent?.submittedAt ?? now;
  const deadline = submittedAt + jobTimeoutMs(ctx, model);
  if (unsent) {
    if (now < unsent.createAfter) return WAIT;
    // cleared before the send: a crash after it leaves a step without a reference, which is
    // never sent again (needs_review)
    await ctx.recordUnsent(null);
  }
  try {
    if (model.kind === 'call') return await callOnce(ctx, p, model, args, limits);
    const ref = await model.create({ ...p, cancelAfterMs: deadline - now }, args);
    crashPoint('worker.provider.after_send');
    await ctx.recordExternalRef(ref, { submittedAt } satisfies JobCheckpoint);
    return WAIT;
  } catch (err) {
    if (!(err instanceof CreateRefused) || ctx.signal.aborted) throw err;
    const refusals = (unsent?.refusals ?? 0) + 1;
    // the provider's Retry-After, or backoff from 1 s (capped at a minute) when it sent none
    const createAfter = now + Math.max(err.retryAfterMs ?? 0, backoffDelayMs(refusals - 1, { firstMs: 1_000, maxMs: 60_000, jitter: 'full' }));
    if (createAfter >= deadline) throw err;
    ctx.logger.warn('worker.provider.create_refused', {
      ...ctx.logFields,
      step: ctx.index,
      refusals,
      createAfter: new Date(createAfter).toISOString(),
      reason: err.message,
    });
    await ctx.recordUnsent({ submittedAt, createAfter, refusals } satisfies UnsentCheckpoint);
    return WAIT;
  }
}

/** A synchronous model: one call, its outputs fetched. */
async function callOnce<Args>(
  ctx: StepContext,
  p: ProviderContext,
  model: Extract<HostedModel<Args>, { kind: 'call' }>,
  args: Args,
  limits: OutputLimits,
): Promise<Delivered> {
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

/** The job's time from its creation: PROVIDER_JOB_TIMEOUT_MS, within the provider's own ceiling. */
function jobTimeoutMs<Args>(ctx: StepContext, model: HostedModel<Args>): number {
  return Math.min(ctx.providers.jobTimeoutMs, (model.kind === 'job' ? model.maxJobMs : undefined) ?? Infinity);
}

/**
 * How long a job the provider was asked to stop (fal's CANCELLATION_REQUESTED: the running
 * model is only signalled) is still polled: it may stop (an error result: provider_timeout,
 * unbilled) or deliver (charged, like any result). Still running after this, the outcome is
 * an operator's (needs_review): the provider may be billing us for it.
 */
function cancelGraceMs(timeoutMs: number): number {
  return Math.min(timeoutMs / 2, 10 * 60_000);
}

/** A definitive failure the provider reported: after a cancel at the deadline it is the timeout's. */
function failure(result: { failed: string; errorCode?: 'provider_timeout' }, job: JobCheckpoint, timeoutMs: number): StepError {
  if (job.cancelRequestedAt !== undefined) {
    return new StepError('provider_timeout', `the provider job did not finish within ${Math.round(timeoutMs / 1000)} s and was cancelled: ${result.failed}`);
  }
  return new StepError(result.errorCode ?? 'provider_error', result.failed);
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
  const timeoutMs = jobTimeoutMs(ctx, model);
  // Past this the step gives up: the job's deadline, or the grace after a cancel request.
  const deadline = job.cancelRequestedAt === undefined ? job.submittedAt + timeoutMs : job.cancelRequestedAt + cancelGraceMs(timeoutMs);
  const kept = { submittedAt: job.submittedAt, ...(job.cancelRequestedAt !== undefined ? { cancelRequestedAt: job.cancelRequestedAt } : {}) };
  // At or past the deadline, one last read is always made before giving up.
  if ((await ctx.databaseNow()) < Math.min(job.nextReadAt ?? 0, deadline)) return WAIT;
  try {
    const result = await model.poll(p, ref, args);
    if ('failed' in result) throw failure(result, job, timeoutMs);
    if (result.done) return await fetchAll(p, result.outputs, limits);
    const now = await ctx.databaseNow();
    if (now > deadline && job.cancelRequestedAt !== undefined) {
      throw new OutcomeUnknown(
        `the provider was asked to cancel the job ${Math.round((now - job.cancelRequestedAt) / 1000)} s ago and still runs it: it may finish and be billed`,
      );
    }
    if (now > deadline) {
      // Past its deadline the job is cancelled before the step fails: left running, it could
      // finish and be billed while the caller is charged nothing. If the provider says it had
      // ended meanwhile, its outcome counts; if it only passed the request on to the running
      // model, the job is polled on (it may still deliver, and is charged if it does); if the
      // cancel gets no answer, the outcome is unknown (the catch below: needs_review).
      const cancel = await model.cancel(p, ref, args);
      if (cancel === 'finished') {
        const ended = await model.poll(p, ref, args);
        if ('failed' in ended) throw failure(ended, job, timeoutMs);
        if (ended.done) return await fetchAll(p, ended.outputs, limits);
        throw new ReadFailed('the provider said the job had ended, then reported it running');
      }
      if (cancel === 'requested') {
        ctx.logger.info('worker.provider.cancel_requested', { ...ctx.logFields, step: ctx.index, ref });
        await ctx.recordExternalRef(ref, { submittedAt: job.submittedAt, cancelRequestedAt: now } satisfies JobCheckpoint);
        return WAIT;
      }
      throw new StepError('provider_timeout', `the provider job did not finish within ${Math.round(timeoutMs / 1000)} s and was cancelled`);
    }
    // Reads work again: back to a read on every re-check.
    if (job.failedReads) await ctx.recordExternalRef(ref, kept satisfies JobCheckpoint);
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
    const nextReadAt = now + readBackoffMs(failedReads, err.retryAfterMs, timeoutMs);
    ctx.logger.warn('worker.provider.read_failed', {
      ...ctx.logFields,
      step: ctx.index,
      failedReads,
      nextReadAt: new Date(nextReadAt).toISOString(),
      reason: err.message,
    });
    await ctx.recordExternalRef(ref, { ...kept, failedReads, nextReadAt } satisfies JobCheckpoint);
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
  return Math.max(backoffDelayMs(failedReads - 1, { firstMs: Math.min(1_000, cap), maxMs: cap, jitter: 'full' }), Math.min(retryAfterMs ?? 0, cap));
}

const num = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) ? v : undefined);

function jobCheckpoint(cp: Record<string, unknown> | null): JobCheckpoint {
  return {
    submittedAt: num(cp?.submittedAt) ?? 0,
    failedReads: num(cp?.failedReads),
    nextReadAt: num(cp?.nextReadAt),
    cancelRequestedAt: num(cp?.cancelRequestedAt),
  };
}

/** The checkpoint of a step whose create the provider refused, or null (recordUnsent marks it). */
function unsentCheckpoint(cp: Record<string, unknown> | null): UnsentCheckpoint | null {
  const submittedAt = num(cp?.submittedAt);
  const createAfter = num(cp?.createAfter);
  if (cp?.unsent !== true || submittedAt === undefined || createAfter === undefined) return null;
  return { submittedAt, createAfter, refusals: num(cp.refusals) ?? 1 };
}

/** A job's fetched files as the step delivers them (a job reports no usage: its price is per output). */
const delivered = (outcome: FetchedOutput[] | StepWait): Delivered | StepWait => (Array.isArray(outcome) ? { files: outcome } : outcome);

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
