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
          headers: auth(ctx, 'create'),
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
      if (urls.length === 0) return { failed: 'Replicate reported success without output files' };
      return { done: true, outputs: urls.map((url) => ({ url, provider: 'replicate' as const })) };
    }
    case 'failed':
    case 'canceled':
    case 'aborted': {
      // Whatever Replicate sent (documented as a string), as text.
      const reason: unknown = p.error ?? 'no reason given';
      return { failed: `Replicate prediction ${p.status}: ${String(reason).slice(0, 300)}` };
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
