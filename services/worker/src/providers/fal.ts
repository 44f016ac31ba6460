import type { PollResult, ProviderContext } from './common';
import { createJob, read, requireCredential } from './common';

/**
 * fal queue API: POST {queue}/{model_id} enqueues ({ request_id }); GET
 * {queue}/{app}/requests/{id}/status answers IN_QUEUE | IN_PROGRESS | COMPLETED; GET
 * {queue}/{app}/requests/{id} returns the result. `app` is the model id without its
 * subpath (fal-ai/flux/schnell -> fal-ai/flux). URLs are built from our configured base,
 * never taken from the answer.
 */
interface Enqueued {
  request_id: string;
}
interface Status {
  status: 'IN_QUEUE' | 'IN_PROGRESS' | 'COMPLETED';
}

function auth(ctx: ProviderContext) {
  return { Authorization: `Key ${requireCredential(ctx.credentials.fal, 'FAL_KEY')}` };
}

function appOf(modelId: string): string {
  return modelId.split('/').slice(0, 2).join('/');
}

export async function falCreate(ctx: ProviderContext, modelId: string, input: Record<string, unknown>): Promise<string> {
  const r = await createJob(() => ctx.http.json<Enqueued>('POST', `${ctx.baseUrls.fal}/${modelId}`, { json: input, headers: auth(ctx), signal: ctx.signal }), ctx.signal);
  if (typeof r.request_id !== 'string' || r.request_id.length === 0) throw new Error('fal answered without a request id');
  return r.request_id;
}

/** Polls; on completion fetches the result and lets `outputsOf` pick the file URLs. */
export async function falPoll(
  ctx: ProviderContext,
  modelId: string,
  requestId: string,
  outputsOf: (result: Record<string, unknown>) => string[],
): Promise<PollResult> {
  const base = `${ctx.baseUrls.fal}/${appOf(modelId)}/requests/${encodeURIComponent(requestId)}`;
  const s = await read(() => ctx.http.json<Status>('GET', `${base}/status`, { headers: auth(ctx), signal: ctx.signal }), ctx.signal);
  if (s.status === 'IN_QUEUE' || s.status === 'IN_PROGRESS') return { done: false };
  if (s.status !== 'COMPLETED') return { failed: `fal reported an unknown status ${String(s.status)}` };
  const result = await read(() => ctx.http.json<Record<string, unknown>>('GET', base, { headers: auth(ctx), signal: ctx.signal }), ctx.signal);
  const urls = outputsOf(result);
  if (urls.length === 0) return { failed: 'fal completed without output files' };
  return { done: true, outputs: urls.map((url) => ({ url })) };
}
