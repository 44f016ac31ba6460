import { OutcomeUnknown } from '../outcome-unknown';
import type { PollResult, ProviderContext } from './common';
import { createJob, read, ReadFailed, requireCredential, timed } from './common';

/**
 * Replicate predictions API: POST /models/{owner}/{name}/predictions creates a prediction
 * ({ id, status: starting|processing|succeeded|failed|canceled|aborted, output, error }); GET
 * /predictions/{id} polls it. Output is a URL or a list of URLs. Only a terminal status is
 * an outcome; a status we do not know is no answer at all (ReadFailed), not a failure.
 */
interface Prediction {
  id: string;
  status: 'starting' | 'processing' | 'succeeded' | 'failed' | 'canceled' | 'aborted';
  output?: unknown;
  error?: unknown;
  /** True once Replicate deleted the prediction's input and output (an hour after it ended). */
  data_removed?: boolean;
}

/**
 * The longest a Replicate job may be given. Replicate deletes a prediction's output files an
 * hour after it ends ("Output file URLs expire after 1 hour"): a job read later than that is
 * billed and has nothing to deliver. Every job completes, is cancelled or is handed to an
 * operator by its deadline, so with the deadline at 50 min its output is still there for the
 * last read and the downloads, whatever PROVIDER_JOB_TIMEOUT_MS says.
 */
export const REPLICATE_MAX_JOB_MS = 50 * 60_000;

/**
 * Cancel-After: Replicate cancels the prediction itself (status `canceled` if it was running,
 * `aborted` if it never started), so a job is not left running when no worker is left to
 * cancel it. A minute past our own deadline: normally our cancel at the deadline decides (and
 * sees a job that ended just then); Replicate's is the backstop, still well within the hour
 * the output is kept. A duration; whole seconds with the `s` unit, as in Replicate's examples
 * ("1m", "5m": changelog 2025-10-16 "Set deadlines for predictions", read 2026-11-26;
 * replicate-python-beta sends `cancel_after` as the plain string header, at 48e138a).
 */
const CANCEL_AFTER_MARGIN_MS = 60_000;

function cancelAfter(ms: number): string {
  return `${Math.ceil((Math.min(ms, REPLICATE_MAX_JOB_MS) + CANCEL_AFTER_MARGIN_MS) / 1000)}s`;
}

function auth(ctx: ProviderContext, use: 'create' | 'read') {
  return { Authorization: `Bearer ${requireCredential(ctx.credentials.replicate, 'REPLICATE_API_TOKEN', use)}` };
}

export async function replicateCreate(ctx: ProviderContext, model: string, input: Record<string, unknown>): Promise<string> {
  const p = await createJob(
    () =>
      timed(ctx, 'replicate', 'create', () =>
        ctx.http.json<Prediction>('POST', `${ctx.baseUrls.replicate}/models/${model}/predictions`, {
          json: { input },
          headers: { ...auth(ctx, 'create'), ...(ctx.cancelAfterMs !== undefined ? { 'Cancel-After': cancelAfter(ctx.cancelAfterMs) } : {}) },
          signal: ctx.signal,
        }),
      ),
    ctx.signal,
  );
  if (typeof p.id !== 'string' || p.id.length === 0) throw new Error('Replicate answered without a prediction id');
  return p.id;
}

export async function replicatePoll(ctx: ProviderContext, id: string): Promise<PollResult> {
  const p = await read(
    () =>
      timed(ctx, 'replicate', 'poll', () =>
        ctx.http.json<Prediction | null>('GET', `${ctx.baseUrls.replicate}/predictions/${encodeURIComponent(id)}`, {
          headers: auth(ctx, 'read'),
          signal: ctx.signal,
        }),
      ),
    ctx.signal,
  );
  switch (p?.status) {
    case 'starting':
    case 'processing':
      return { done: false };
    case 'succeeded': {
      const urls = (Array.isArray(p.output) ? p.output : [p.output]).filter((u): u is string => typeof u === 'string');
      // Billed, and nothing left to deliver: not a failure at zero charge, an operator's call.
      if (urls.length === 0 && p.data_removed === true) throw new OutcomeUnknown("Replicate had deleted the prediction's output before it was read");
      if (urls.length === 0) return { failed: 'Replicate reported success without output files' };
      return { done: true, outputs: urls.map((url) => ({ url, provider: 'replicate' as const })) };
    }
    case 'canceled':
    case 'aborted':
      // Only a deadline cancels our predictions: ours at the deadline, or Replicate's at the
      // Cancel-After we sent (aborted: it never started).
      return { failed: `Replicate prediction ${p.status} at its deadline`, errorCode: 'provider_timeout' };
    case 'failed': {
      // Whatever Replicate sent (documented as a string), as text.
      const reason: unknown = p.error ?? 'no reason given';
      return { failed: `Replicate prediction failed: ${String(reason).slice(0, 300)}` };
    }
    default:
      throw new ReadFailed(`Replicate answered an unknown prediction status ${JSON.stringify(String(p?.status)).slice(0, 60)}`);
  }
}

/**
 * Cancels a prediction past its deadline (POST /predictions/{id}/cancel answers the prediction).
 * 'cancelled': Replicate took the cancel (it stops and bills no further); 'finished': it had
 * already ended, and the next poll tells how. No answer: ReadFailed, like any read.
 */
export async function replicateCancel(ctx: ProviderContext, id: string): Promise<'cancelled' | 'finished'> {
  const p = await read(
    () =>
      timed(ctx, 'replicate', 'cancel', () =>
        ctx.http.json<Prediction | null>('POST', `${ctx.baseUrls.replicate}/predictions/${encodeURIComponent(id)}/cancel`, {
          headers: auth(ctx, 'read'),
          signal: ctx.signal,
        }),
      ),
    ctx.signal,
  );
  switch (p?.status) {
    case 'starting':
    case 'processing':
    case 'canceled':
      return 'cancelled';
    case 'succeeded':
    case 'failed':
    case 'aborted':
      return 'finished';
    default:
      throw new ReadFailed(`Replicate answered a cancel with an unknown status ${JSON.stringify(String(p?.status)).slice(0, 60)}`);
  }
}
