import { ceilDiv, formatUsd } from '@tes/core';
import type { ModelPrice, ProviderUsage } from '../types';

/**
 * How image.generate's providers bill, so our price follows their bill. Replicate bills
 * FLUX schnell per output image; fal bills it per megapixel of output; OpenAI bills its GPT
 * image models per token, where an image's output tokens are fixed by its quality and size.
 */

export const IMAGE_QUALITIES = ['low', 'medium', 'high'] as const;
export type ImageQuality = (typeof IMAGE_QUALITIES)[number];
type Size = '1024x1024' | '1024x1536' | '1536x1024';

/**
 * Output (image) tokens of one image by quality and size, for gpt-image-1 and gpt-image-1.5.
 * They are OpenAI's per-image prices divided by the model's image-output token price: e.g.
 * gpt-image-1.5 high 1024x1024 $0.133 = 4,160 x $32/1M, gpt-image-1 high $0.167 = 4,160 x
 * $40/1M (sources and the date read: docs/providers.md#sources).
 */
const OPENAI_IMAGE_OUTPUT_TOKENS: Readonly<Record<ImageQuality, Readonly<Record<Size, number>>>> = {
  low: { '1024x1024': 272, '1024x1536': 408, '1536x1024': 400 },
  medium: { '1024x1024': 1_056, '1024x1536': 1_584, '1536x1024': 1_568 },
  high: { '1024x1024': 4_160, '1024x1536': 6_240, '1536x1024': 6_208 },
};

/**
 * The most prompt tokens a prompt can count: a byte-level tokenizer never makes more tokens
 * than the text has UTF-8 bytes; 64 more for what OpenAI adds around it. Real prompts count
 * about a quarter of their bytes, so this bound is loose only on a few hundred micros.
 */
function promptTokenBound(prompt: string): number {
  return Buffer.byteLength(prompt, 'utf8') + 64;
}

/**
 * fal's megapixel, as counted at the worst for us: 10^6 pixels, each image rounded up to whole
 * megapixels ("all per-megapixel prices round up to nearest MP"). A 1024 x 1024 image is then 2
 * megapixels: counted as one (1024 x 1024 to the megapixel), its price ($0.004) was below fal's
 * bill for it under that reading ($0.006). Where fal bills fractions we earn the difference.
 */
const FAL_MEGAPIXEL = 1_000_000;

function falMegapixels(size: Size): number {
  const [w, h] = size.split('x').map(Number) as [number, number];
  return ceilDiv(w * h, FAL_MEGAPIXEL);
}

/** The most tokens a usage report is believed for (a report past it is ignored, not charged). */
const MAX_REPORTED_TOKENS = 10_000_000;

/** A provider's usage report, when it is one we can price (non-negative integers, bounded). */
export function usableUsage(usage: ProviderUsage | undefined): ProviderUsage | undefined {
  const ok = (n: unknown) => typeof n === 'number' && Number.isSafeInteger(n) && n >= 0 && n <= MAX_REPORTED_TOKENS;
  return usage && ok(usage.inputTokens) && ok(usage.outputTokens) ? usage : undefined;
}

interface PricedArgs {
  prompt: string;
  count: number;
  size: Size;
  quality?: ImageQuality;
}

/**
 * What `units` delivered images cost. Token-priced (OpenAI): in a quote, each image's output
 * tokens for its quality and size plus the prompt's token bound once (one request); at
 * settlement, the tokens OpenAI reported for the request, prorated to the images delivered.
 * Megapixel-priced (fal): each image's megapixels. Otherwise per image. The step's cost is
 * capped at the reservation by the worker, which counts any excess as capped.
 */
export function imageCost(units: number, price: ModelPrice, args: PricedArgs, usage?: ProviderUsage): number {
  if (price.outputTokenMicrosPerMillion !== undefined) {
    const inRate = price.inputTokenMicrosPerMillion ?? 0;
    const outRate = price.outputTokenMicrosPerMillion;
    const reported = usableUsage(usage);
    if (reported) {
      const all = reported.inputTokens * inRate + reported.outputTokens * outRate;
      return Math.max(price.minimumMicros, ceilDiv(all * units, 1_000_000 * Math.max(1, args.count)));
    }
    const perImage = OPENAI_IMAGE_OUTPUT_TOKENS[args.quality ?? 'medium'][args.size];
    return Math.max(price.minimumMicros, ceilDiv(units * perImage * outRate + promptTokenBound(args.prompt) * inRate, 1_000_000));
  }
  if (price.megapixelPriceMicros !== undefined) return Math.max(price.minimumMicros, units * falMegapixels(args.size) * price.megapixelPriceMicros);
  return Math.max(price.minimumMicros, units * price.unitPriceMicros);
}

export function describeImagePrice(price: ModelPrice): string {
  if (price.outputTokenMicrosPerMillion !== undefined) {
    const t = OPENAI_IMAGE_OUTPUT_TOKENS;
    return (
      `${formatUsd(price.outputTokenMicrosPerMillion)} per 1M image tokens (one 1024x1024 image: ${t.low['1024x1024']} low, ` +
      `${t.medium['1024x1024']} medium, ${t.high['1024x1024']} high; at most 1.5 times that at 1024x1536 or 1536x1024) ` +
      `and ${formatUsd(price.inputTokenMicrosPerMillion ?? 0)} per 1M prompt tokens, as OpenAI reports them, at most the quote`
    );
  }
  if (price.megapixelPriceMicros !== undefined) {
    return `${formatUsd(price.megapixelPriceMicros)} per megapixel (each image rounded up to whole megapixels of 10^6 pixels)`;
  }
  return `${formatUsd(price.unitPriceMicros)} per image`;
}
