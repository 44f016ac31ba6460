import { formatUsd } from '@tes/core';
import { defineTool, type ProviderAvailability } from '../types';

export const IMAGE_GENERATE_LIMITS = { maxPromptChars: 2_000, maxCount: 4, maxOutputBytes: 40 * 1024 * 1024 } as const;
export const IMAGE_GENERATE_SIZES = ['1024x1024', '1024x1536', '1536x1024'] as const;

/** image.generate's arguments as its schema admits them, defaults applied. */
export interface ImageGenerateArgs {
  model: string;
  prompt: string;
  count: number;
  size: (typeof IMAGE_GENERATE_SIZES)[number];
  format: 'png' | 'jpeg';
  seed?: number;
}

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
          enum: ['replicate/flux-schnell', 'fal/flux-schnell', 'openai/gpt-image-1'],
          description: 'Hosted model; the first available one when omitted.',
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
        seed: { type: 'integer', minimum: 0, maximum: 2_147_483_647, description: 'Fixed seed for repeatable output (Replicate and fal).' },
      },
    },
    example: { prompt: 'A lighthouse on a cliff at dawn, watercolor', count: 1, size: '1024x1024' },
    models: [
      {
        id: 'replicate/flux-schnell',
        description: 'FLUX.1 [schnell] on Replicate (black-forest-labs/flux-schnell). Needs REPLICATE_API_TOKEN.',
        example: { prompt: 'A red fox in fresh snow', count: 2, size: '1536x1024', seed: 42 },
        available: p.replicate,
        external: true,
        queued: true,
      },
      {
        id: 'fal/flux-schnell',
        description: 'FLUX.1 [schnell] on fal (fal-ai/flux/schnell). Needs FAL_KEY.',
        example: { prompt: 'A paper boat on a puddle', count: 1, size: '1024x1024' },
        available: p.fal,
        external: true,
        queued: true,
      },
      {
        id: 'openai/gpt-image-1',
        description: 'OpenAI gpt-image-1 through the Images API. Needs OPENAI_API_KEY.',
        example: { prompt: 'An isometric city block at night', count: 1, size: '1024x1536', format: 'jpeg' },
        available: p.openai,
        external: true,
      },
    ],
    describePrice: (price) => `${formatUsd(price.unitPriceMicros)} per image`,
    estimateUnits: (args) => ({ units: args.count }),
    plan: () => [{ name: 'generate', billed: true, external: true, timeoutMs: 10 * 60_000 }],
  });
}
