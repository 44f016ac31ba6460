import { StepError } from '@tes/core';
import type { ProviderContext, ProviderOutput } from './common';
import { createJob, requireCredential } from './common';

/**
 * OpenAI Images API (POST /images/generations): synchronous; with gpt-image-1 every image
 * comes back inline as b64_json. One request, so no waiting state; an unanswered request is
 * an unknown outcome (createJob classifies it).
 */
interface ImagesResponse {
  data?: { b64_json?: string }[];
}

export async function openaiGenerateImages(
  ctx: ProviderContext,
  body: { model: string; prompt: string; n: number; size: string; output_format: 'png' | 'jpeg' },
): Promise<ProviderOutput[]> {
  const key = requireCredential(ctx.credentials.openai, 'OPENAI_API_KEY');
  const res = await createJob(
    () => ctx.http.json<ImagesResponse>('POST', `${ctx.baseUrls.openai}/images/generations`, { json: body, headers: { Authorization: `Bearer ${key}` }, signal: ctx.signal, timeoutMs: 300_000 }),
    ctx.signal,
  );
  const images = (res.data ?? []).map((d) => d.b64_json).filter((b): b is string => typeof b === 'string' && b.length > 0);
  if (images.length === 0) throw new StepError('provider_error', 'OpenAI answered without images');
  return images.map((b) => ({ bytes: Buffer.from(b, 'base64') }));
}
