import { usableUsage, type ProviderUsage } from '@tes/catalog';
import { StepError } from '@tes/core';
import type { ProviderContext, ProviderOutput } from './common';
import { createJob, requireCredential, timed } from './common';
import { HttpStatusError, retryAfterMs } from '@tes/outbound';

/**
 * How long one OpenAI call may take, whole (connect, send, the answer's headers and body).
 * With a create's in-process retries (CREATE_RETRY_WINDOW_MS) it ends before its step's
 * deadline (the catalog's plan: image.generate 600 s, audio.speech 180 s), so a call still
 * unanswered is an unknown outcome (needs_review, the reservation held), never a step_timeout
 * at zero charge on a request OpenAI may have run and billed.
 */
export const OPENAI_CALL_DEADLINE_MS = { images: 300_000, speech: 150_000 } as const;

/**
 * OpenAI Images API (POST /images/generations): synchronous; with the GPT image models every
 * image comes back inline as b64_json, with the request's token `usage` (ImagesResponse in
 * openai-node src/resources/images.ts), which the step is charged from. The quality is
 * always sent: without it OpenAI picks `auto`, which may be high, at 4 times medium's price.
 * One request, so no waiting state; an unanswered request is an unknown outcome (createJob
 * classifies it).
 */
interface ImagesResponse {
  data?: { b64_json?: string }[];
  usage?: { input_tokens?: unknown; output_tokens?: unknown };
}

export async function openaiGenerateImages(
  ctx: ProviderContext,
  body: { model: string; prompt: string; n: number; size: string; quality: 'low' | 'medium' | 'high'; output_format: 'png' | 'jpeg' },
): Promise<{ outputs: ProviderOutput[]; usage?: ProviderUsage }> {
  const key = requireCredential(ctx.credentials.openai, 'OPENAI_API_KEY');
  const res = await createJob(
    () =>
      timed(ctx, 'openai', 'create', () =>
        ctx.http.json<ImagesResponse>('POST', `${ctx.baseUrls.openai}/images/generations`, {
          json: body,
          headers: { Authorization: `Bearer ${key}` },
          signal: ctx.signal,
          timeoutMs: OPENAI_CALL_DEADLINE_MS.images,
          deadlineMs: OPENAI_CALL_DEADLINE_MS.images,
        }),
      ),
    ctx.signal,
  );
  const images = (res.data ?? []).map((d) => d.b64_json).filter((b): b is string => typeof b === 'string' && b.length > 0);
  if (images.length === 0) throw new StepError('provider_error', 'OpenAI answered without images');
  // a usage we cannot price is left out: the step is then charged the quoted tokens per image
  const usage = usableUsage({ inputTokens: res.usage?.input_tokens as number, outputTokens: res.usage?.output_tokens as number });
  return { outputs: images.map((b) => ({ bytes: Buffer.from(b, 'base64') })), ...(usage ? { usage } : {}) };
}

/**
 * OpenAI text to speech (POST /audio/speech): answers with the audio bytes. One request;
 * an unanswered one is an unknown outcome, like images.
 */
export async function openaiSpeech(
  ctx: ProviderContext,
  body: { model: string; input: string; voice: string; response_format: 'wav' | 'mp3' },
  maxBytes: number,
): Promise<Buffer> {
  const key = requireCredential(ctx.credentials.openai, 'OPENAI_API_KEY');
  return createJob(
    () =>
      timed(ctx, 'openai', 'create', async () => {
        const res = await ctx.http.request('POST', `${ctx.baseUrls.openai}/audio/speech`, {
          body: JSON.stringify(body),
          headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' },
          signal: ctx.signal,
          timeoutMs: OPENAI_CALL_DEADLINE_MS.speech,
          deadlineMs: OPENAI_CALL_DEADLINE_MS.speech,
          maxBytes,
        });
        if (res.status < 200 || res.status >= 300) throw new HttpStatusError(res.status, res.body.toString('utf8').slice(0, 300), retryAfterMs(res.headers));
        return res.body;
      }),
    ctx.signal,
  );
}
