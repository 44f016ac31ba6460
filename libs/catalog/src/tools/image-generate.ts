import { defineTool, type ProviderAvailability } from '../types';
import { describeImagePrice, IMAGE_QUALITIES, imageCost, type ImageQuality } from './image-generate-pricing';

export const IMAGE_GENERATE_LIMITS = { maxPromptChars: 2_000, maxCount: 4, maxOutputBytes: 40 * 1024 * 1024 } as const;
export const IMAGE_GENERATE_SIZES = ['1024x1024', '1024x1536', '1536x1024'] as const;

/** image.generate's arguments as its schema admits them, defaults applied. */
export interface ImageGenerateArgs {
  model: string;
  prompt: string;
  count: number;
  size: (typeof IMAGE_GENERATE_SIZES)[number];
  format: 'png' | 'jpeg';
  /** OpenAI's image quality, sent explicitly (OpenAI's own default, auto, may pick high). */
  quality: ImageQuality;
  seed?: number;
}

/** The OpenAI image model offered, by OpenAI's id (gpt-image-1 was retired on 2026-10-23). */
export const OPENAI_IMAGE_MODEL = 'gpt-image-1.5';

/**
 * image.generate: text to image on a hosted model. Available per model only when that
 * provider's credential is configured. Replicate and fal run as queued jobs (the execution
 * waits between polls); OpenAI answers in one request. The one step is external: if a crash
 * leaves its outcome unknown, the execution goes to needs_review, never a second request.
 */
export function imageGenerate(p: ProviderAvailability) {
  return defineTool<ImageGenerateArgs>()({
    name: 'image.generate',
    category: 'image',
    description: 'Generate images from a text prompt with a hosted model (Replicate, fal or OpenAI).',
    unit: 'image',
    steps: ['generate'],
    inputSchema: {
      type: 'object',
      additionalProperties: false,
      required: ['prompt'],
      properties: {
        model: {
          type: 'string',
          enum: ['replicate/flux-schnell', 'fal/flux-schnell', 'openai/gpt-image-1.5', 'openai/gpt-image-1'],
          description: 'Hosted model; the first available one when omitted. openai/gpt-image-1 is retired (OpenAI shut it down on 2026-10-23).',
        },
        prompt: {
          type: 'string',
          minLength: 1,
          maxLength: IMAGE_GENERATE_LIMITS.maxPromptChars,
          pattern: '\\S',
          description: `What to draw, at most ${IMAGE_GENERATE_LIMITS.maxPromptChars} characters.`,
        },
        count: { type: 'integer', minimum: 1, maximum: IMAGE_GENERATE_LIMITS.maxCount, default: 1, description: 'Number of images; each is charged.' },
        size: {
          type: 'string',
          enum: [...IMAGE_GENERATE_SIZES],
          default: '1024x1024',
          description: 'Width x height in pixels (Replicate uses the matching aspect ratio).',
        },
        format: { type: 'string', enum: ['png', 'jpeg'], default: 'png' },
        quality: {
          type: 'string',
          enum: [...IMAGE_QUALITIES],
          default: 'medium',
          description: 'OpenAI models: image quality, which sets the price (high costs about 4 times medium). Replicate and fal ignore it.',
        },
        seed: { type: 'integer', minimum: 0, maximum: 2_147_483_647, description: 'Fixed seed for repeatable output (Replicate and fal).' },
      },
    },
    example: { prompt: 'A lighthouse on a cliff at dawn, watercolor', count: 1, size: '1024x1024' },
    models: [
      {
        id: 'replicate/flux-schnell',
        provider: { name: 'replicate', model: 'black-forest-labs/flux-schnell' },
        description: 'FLUX.1 [schnell] on Replicate (black-forest-labs/flux-schnell). Needs REPLICATE_API_TOKEN.',
        example: { prompt: 'A red fox in fresh snow', count: 2, size: '1536x1024', seed: 42 },
        available: p.replicate,
        external: true,
        queued: true,
      },
      {
        id: 'fal/flux-schnell',
        provider: { name: 'fal', model: 'fal-ai/flux/schnell' },
        description: 'FLUX.1 [schnell] on fal (fal-ai/flux/schnell). Needs FAL_KEY.',
        example: { prompt: 'A paper boat on a puddle', count: 1, size: '1024x1024' },
        available: p.fal,
        external: true,
        queued: true,
      },
      {
        id: 'openai/gpt-image-1.5',
        provider: { name: 'openai', model: OPENAI_IMAGE_MODEL },
        description: 'OpenAI gpt-image-1.5 through the Images API, at the quality asked. Needs OPENAI_API_KEY.',
        example: { prompt: 'An isometric city block at night', count: 1, size: '1024x1536', format: 'jpeg', quality: 'medium' },
        available: p.openai,
        external: true,
      },
      {
        // Kept so a caller that names it is told why it is refused (model_unavailable, reason retired).
        id: 'openai/gpt-image-1',
        provider: { name: 'openai', model: 'gpt-image-1', retiresOn: '2026-10-23' },
        description: 'OpenAI gpt-image-1 through the Images API; use openai/gpt-image-1.5.',
        example: { prompt: 'An isometric city block at night', count: 1, size: '1024x1536', format: 'jpeg' },
        available: p.openai,
        external: true,
      },
    ],
    describePrice: describeImagePrice,
    estimateUnits: (args) => ({ units: args.count }),
    cost: (units, price, args, usage) => imageCost(units, price, args, usage),
    plan: () => [{ name: 'generate', billed: true, external: true, timeoutMs: 10 * 60_000 }],
  });
}
