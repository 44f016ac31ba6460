import type { PollResult, ProviderContext } from './common';
import { createJob, read, ReadFailed, requireCredential, timed } from './common';
import { HttpStatusError, retryAfterMs } from '@tes/outbound';

/**
 * fal queue API: POST {queue}/{model_id} enqueues ({ request_id }); GET
 * {queue}/{app}/requests/{id}/status answers IN_QUEUE | IN_PROGRESS | COMPLETED; GET
 * {queue}/{app}/requests/{id} returns the result, or the error the model returned. `app`
 * is the model id without its subpath (fal-ai/flux/schnell -> fal-ai/flux). URLs are built
 * from our configured base, never taken from the answer.
 */
interface Enqueued {
  request_id: string;
}
interface Status {
  status: 'IN_QUEUE' | 'IN_PROGRESS' | 'COMPLETED';
}

function auth(ctx: ProviderContext, use: 'create' | 'read') {
  return { Authorization: `Key ${requireCredential(ctx.credentials.fal, 'FAL_KEY', use)}` };
}

function appOf(modelId: string): string {
  return modelId.split('/').slice(0, 2).join('/');
}

export async function falCreate(ctx: ProviderContext, modelId: string, input: Record<string, unknown>): Promise<string> {
  const r = await createJob(
    () =>
      timed(ctx, 'fal', 'create', () =>
        ctx.http.json<Enqueued>('POST', `${ctx.baseUrls.fal}/${modelId}`, { json: input, headers: auth(ctx, 'create'), signal: ctx.signal }),
      ),
    ctx.signal,
  );
  if (typeof r.request_id !== 'string' || r.request_id.length === 0) throw new Error('fal answered without a request id');
  return r.request_id;
}

/**
 * Answers of fal's own servers that say nothing about the request: access, a result no
 * longer kept (fal keeps results for minutes to an hour), rate limits, timeouts.
 */
const NOT_ABOUT_THE_REQUEST = new Set([401, 403, 404, 408, 410, 429]);

/**
 * Polls; on completion fetches the result and lets `outputsOf` pick the file URLs. A
 * completed request that failed answers its result URL with its error, so an error there is
 * an outcome only when it is one of the two failures fal documents (see failureOf). Any
 * other error status, from a proxy in front of fal or from fal's own front (whose answers
 * carry X-Fal-Request-Id too), says nothing about the request: no answer at all.
 */
export async function falPoll(
  ctx: ProviderContext,
  modelId: string,
  requestId: string,
  outputsOf: (result: Record<string, unknown>) => string[] | { failed: string },
): Promise<PollResult> {
  const base = `${ctx.baseUrls.fal}/${appOf(modelId)}/requests/${encodeURIComponent(requestId)}`;
  const s = await read(
    () => timed(ctx, 'fal', 'poll', () => ctx.http.json<Status | null>('GET', `${base}/status`, { headers: auth(ctx, 'read'), signal: ctx.signal })),
    ctx.signal,
  );
  if (s?.status === 'IN_QUEUE' || s?.status === 'IN_PROGRESS') return { done: false };
  if (s?.status !== 'COMPLETED') throw new ReadFailed(`fal answered an unknown status ${JSON.stringify(String(s?.status)).slice(0, 60)}`);
  const result = await read<{ output: Record<string, unknown> | null } | { failed: string }>(
    () =>
      timed(ctx, 'fal', 'poll', async () => {
        const res = await ctx.http.request('GET', base, { headers: { Accept: 'application/json', ...auth(ctx, 'read') }, signal: ctx.signal });
        const text = res.body.toString('utf8');
        if (res.status >= 200 && res.status < 300) return { output: JSON.parse(text) as Record<string, unknown> | null };
        const failure = NOT_ABOUT_THE_REQUEST.has(res.status) ? null : failureOf(res.headers['x-fal-error-type'], text);
        if (failure) return { failed: `fal request failed (HTTP ${res.status} ${failure.type}): ${failure.detail}` };
        throw new HttpStatusError(res.status, text, retryAfterMs(res.headers));
      }),
    ctx.signal,
  );
  if ('failed' in result) return result;
  const urls = outputsOf(result.output ?? {});
  if ('failed' in urls) return urls;
  if (urls.length === 0) return { failed: 'fal completed without output files' };
  return { done: true, outputs: urls.map((url) => ({ url, provider: 'fal' as const })) };
}

/**
 * What a cancel got: 'cancelled' (the request was taken off the queue: it never ran, nothing
 * is billed), 'requested' (it was running: the model was only signalled and may still deliver,
 * and be billed; poll on), 'finished' (it had ended: the next poll tells how).
 */
export type CancelAnswer = 'cancelled' | 'requested' | 'finished';

/**
 * Cancels a request past its deadline: PUT {queue}/{app}/requests/{id}/cancel. fal documents
 * four answers (https://fal.ai/docs/inference-api/queue/cancel, read 2026-11-26; fal-js
 * libs/client/src/queue.ts `cancel` at 381105e only awaits the call): OK (removed from the
 * queue), CANCELLATION_REQUESTED (202: running, "a cancelled request continues consuming GPU
 * time" unless the model stops), ALREADY_COMPLETED (400) and NOT_FOUND. NOT_FOUND, like any
 * other answer, says nothing we can act on: no answer (ReadFailed after the read's retries).
 */
export async function falCancel(ctx: ProviderContext, modelId: string, requestId: string): Promise<CancelAnswer> {
  const url = `${ctx.baseUrls.fal}/${appOf(modelId)}/requests/${encodeURIComponent(requestId)}/cancel`;
  return read(
    () =>
      timed(ctx, 'fal', 'cancel', async () => {
        const res = await ctx.http.request('PUT', url, { headers: { Accept: 'application/json', ...auth(ctx, 'read') }, signal: ctx.signal });
        const text = res.body.toString('utf8');
        const status = (() => {
          try {
            return (JSON.parse(text) as { status?: unknown } | null)?.status;
          } catch {
            return undefined;
          }
        })();
        const ok = res.status >= 200 && res.status < 300;
        if (ok && status === 'OK') return 'cancelled' as const;
        if (ok && status === 'CANCELLATION_REQUESTED') return 'requested' as const;
        if ((ok || res.status === 400) && status === 'ALREADY_COMPLETED') return 'finished' as const;
        throw new HttpStatusError(res.status, text, retryAfterMs(res.headers));
      }),
    ctx.signal,
  );
}

/**
 * fal flux's images, less those its safety checker flagged: the result's `has_nsfw_concepts`
 * holds one flag per image (fal-ai/flux/schnell's output schema), and a flagged image is
 * delivered (black) all the same. None left is a refusal of the content: failed, unbilled.
 */
export function falImagesOf(result: Record<string, unknown>): string[] | { failed: string } {
  const images = Array.isArray(result.images) ? (result.images as unknown[]) : [];
  const flags = Array.isArray(result.has_nsfw_concepts) ? (result.has_nsfw_concepts as unknown[]) : [];
  const kept = images.filter((_, i) => flags[i] !== true);
  if (images.length > 0 && kept.length === 0) return { failed: `fal's safety checker flagged every image (${images.length})` };
  return kept.map((i) => (i as { url?: unknown } | null)?.url).filter((u): u is string => typeof u === 'string');
}

/**
 * The failure an error answer of fal's result URL documents, or null when it documents none.
 * Request errors (timeouts, runner failures, cancellation): { detail, error_type } with the
 * same type in X-Fal-Error-Type (docs: model-apis/request-errors). Model errors (input
 * rejected, content policy): { detail: [{ loc, msg, type, url }] } (docs: model-apis/errors).
 */
function failureOf(errorTypeHeader: string | string[] | undefined, body: string): { type: string; detail: string } | null {
  const parsed = ((): { detail?: unknown; error_type?: unknown } | null => {
    try {
      return JSON.parse(body) as { detail?: unknown; error_type?: unknown } | null;
    } catch {
      return null; // not JSON: only the header can still say what failed
    }
  })();
  const detail = parsed?.detail;
  const type = typeof errorTypeHeader === 'string' ? errorTypeHeader : parsed?.error_type;
  if (typeof type === 'string' && type.length > 0) {
    return { type: type.slice(0, 60), detail: (typeof detail === 'string' ? detail : JSON.stringify(detail ?? null)).slice(0, 300) };
  }
  const typed = Array.isArray(detail) ? detail.filter((d): d is { type: string; msg?: unknown } => typeof (d as { type?: unknown })?.type === 'string') : [];
  if (typed.length === 0) return null;
  return {
    type: typed
      .map((d) => d.type)
      .join(',')
      .slice(0, 60),
    detail: typed
      .map((d) => (typeof d.msg === 'string' ? d.msg : d.type))
      .join('; ')
      .slice(0, 300),
  };
}
