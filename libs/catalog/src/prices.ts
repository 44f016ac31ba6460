import type { PriceList } from './types';

/**
 * A second of a step's deadline when the step runs out of it, for a model whose price entry
 * names no `timeoutMicrosPerSecond`: 0, free. A published price version is a promise: an
 * execution quoted under a list that said nothing of timeouts (every list published before the
 * field existed) is not charged for one; a list that names a rate (the default list: 100 µ$,
 * $0.36 an hour of a worker slot, so a render that runs out of its 60 s costs $0.006) is.
 */
export const DEFAULT_TIMEOUT_MICROS_PER_SECOND = 0;

/** The price list a fresh installation starts with (`prices publish` replaces it). */
export const DEFAULT_PRICE_LIST: PriceList = {
  currency: 'usd',
  // timeoutMicrosPerSecond: models that run on our workers (provider models' timeouts are never charged)
  tools: {
    'image.render': { models: { sharp: { unitPriceMicros: 1_000, minimumMicros: 1_000, timeoutMicrosPerSecond: 100 } } },
    'image.transform': { models: { sharp: { unitPriceMicros: 1_000, minimumMicros: 1_000, timeoutMicrosPerSecond: 100 } } },
    'audio.speech': {
      models: {
        'espeak-ng': { unitPriceMicros: 2_000, minimumMicros: 100, timeoutMicrosPerSecond: 100 },
        'openai/gpt-4o-mini-tts': { unitPriceMicros: 20_000, minimumMicros: 1_000 },
      },
    },
    'audio.transcode': { models: { ffmpeg: { unitPriceMicros: 100, minimumMicros: 100, timeoutMicrosPerSecond: 100 } } },
    'video.slideshow': { models: { ffmpeg: { unitPriceMicros: 1_000, minimumMicros: 1_000, timeoutMicrosPerSecond: 100 } } },
    'video.thumbnail': { models: { ffmpeg: { unitPriceMicros: 500, minimumMicros: 500, timeoutMicrosPerSecond: 100 } } },
    'video.transcode': { models: { ffmpeg: { unitPriceMicros: 2_000, minimumMicros: 2_000, timeoutMicrosPerSecond: 100 } } },
    // Provider models: in the unit each provider bills, above its published price (the table
    // of provider prices, ours and the worst-case margin: docs/providers.md#prices-per-provider-model).
    'image.generate': {
      models: {
        // Replicate: $0.003 per output image
        'replicate/flux-schnell': { unitPriceMicros: 4_000, minimumMicros: 4_000 },
        // fal: $0.003 per megapixel (unitPriceMicros: one 1024x1024 image, for lists that predate megapixels)
        'fal/flux-schnell': { unitPriceMicros: 4_000, minimumMicros: 4_000, megapixelPriceMicros: 4_000 },
        // OpenAI: $5 per 1M text input tokens, $32 per 1M image output tokens (unitPriceMicros: medium 1024x1024)
        'openai/gpt-image-1.5': {
          unitPriceMicros: 42_240,
          minimumMicros: 10_000,
          inputTokenMicrosPerMillion: 6_000_000,
          outputTokenMicrosPerMillion: 40_000_000,
        },
      },
    },
    'video.generate': {
      models: {
        'replicate/kling-v1.6-standard': { unitPriceMicros: 60_000, minimumMicros: 300_000 },
        'fal/kling-video-v1-standard': { unitPriceMicros: 60_000, minimumMicros: 300_000 },
      },
    },
    'test.sleep': { models: { sleep: { unitPriceMicros: 0, minimumMicros: 0, timeoutMicrosPerSecond: 100 } } },
  },
};

const PRICE_FIELDS = [
  'unitPriceMicros',
  'minimumMicros',
  'timeoutMicrosPerSecond',
  'megapixelPriceMicros',
  'inputTokenMicrosPerMillion',
  'outputTokenMicrosPerMillion',
] as const;
const OPTIONAL_FIELDS = new Set<string>(PRICE_FIELDS.slice(2));

/** Structural check of a price list before it is published. Returns the problems found. */
export function checkPriceList(value: unknown): string[] {
  const problems: string[] = [];
  if (!value || typeof value !== 'object') return ['price list must be a JSON object'];
  // Unchecked input: every level is `unknown` until tested.
  const list = value as { currency?: unknown; tools?: unknown };
  if (list.currency !== 'usd') problems.push('currency must be "usd"');
  if (!list.tools || typeof list.tools !== 'object') return [...problems, 'tools must be an object'];
  for (const [tool, entry] of Object.entries(list.tools as Record<string, unknown>)) {
    const models: unknown = entry && typeof entry === 'object' ? (entry as { models?: unknown }).models : undefined;
    if (!models || typeof models !== 'object') {
      problems.push(`tools["${tool}"].models must be an object`);
      continue;
    }
    for (const [model, price] of Object.entries(models as Record<string, unknown>)) {
      for (const field of PRICE_FIELDS) {
        const v = price === null || price === undefined ? undefined : (price as Record<string, unknown>)[field];
        if (OPTIONAL_FIELDS.has(field) && v === undefined) continue; // timeouts: DEFAULT_TIMEOUT_MICROS_PER_SECOND; the rest: priced per unit
        if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) {
          problems.push(`tools["${tool}"].models["${model}"].${field} must be a non-negative integer`);
        }
      }
    }
  }
  return problems;
}
