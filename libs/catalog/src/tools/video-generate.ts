import { formatUsd } from '@tes/core';
import { defineTool, type ProviderAvailability } from '../types';

export const VIDEO_GENERATE_LIMITS = { maxPromptChars: 2_000, maxOutputBytes: 200 * 1024 * 1024 } as const;

/** video.generate's arguments as its schema admits them, defaults applied. */
export interface VideoGenerateArgs {
  model: string;
  prompt: string;
  durationSeconds: 5 | 10;
  aspectRatio: '16:9' | '9:16' | '1:1';
}

/**
 * video.generate: text to video on a hosted model. Generation takes minutes, so the step
 * waits (status `waiting`, consumer slot freed) between polls of the provider's job.
 */
export function videoGenerate(p: ProviderAvailability) {
  return defineTool<VideoGenerateArgs>()({
    name: 'video.generate',
    category: 'video',
    description: 'Generate a short video from a text prompt with a hosted model (Replicate or fal).',
    unit: 'second',
    steps: ['generate'],
    inputSchema: {
      type: 'object',
      additionalProperties: false,
      required: ['prompt'],
      properties: {
        model: {
          type: 'string',
          enum: ['replicate/kling-v1.6-standard', 'fal/kling-video-v1-standard'],
          description: 'Hosted model; the first available one when omitted.',
        },
        prompt: { type: 'string', minLength: 1, maxLength: VIDEO_GENERATE_LIMITS.maxPromptChars, pattern: '\\S' },
        durationSeconds: { type: 'integer', enum: [5, 10], default: 5, description: 'Video length; charged per second.' },
        aspectRatio: { type: 'string', enum: ['16:9', '9:16', '1:1'], default: '16:9' },
      },
    },
    example: { prompt: 'Waves rolling onto a beach at sunset, slow camera pan', durationSeconds: 5 },
    models: [
      {
        id: 'replicate/kling-v1.6-standard',
        provider: { name: 'replicate', model: 'kwaivgi/kling-v1.6-standard' },
        description: 'Kling v1.6 standard on Replicate (kwaivgi/kling-v1.6-standard). Needs REPLICATE_API_TOKEN and ffprobe on the worker.',
        example: { prompt: 'A hummingbird hovering at a flower', durationSeconds: 5, aspectRatio: '1:1' },
        available: p.replicate,
        external: true,
        queued: true,
        requires: ['ffprobe'],
      },
      {
        id: 'fal/kling-video-v1-standard',
        provider: { name: 'fal', model: 'fal-ai/kling-video/v1/standard/text-to-video' },
        description: 'Kling 1.0 standard on fal (fal-ai/kling-video/v1/standard/text-to-video). Needs FAL_KEY and ffprobe on the worker.',
        example: { prompt: 'Timelapse of clouds over mountains', durationSeconds: 10 },
        available: p.fal,
        external: true,
        queued: true,
        requires: ['ffprobe'],
      },
    ],
    describePrice: (price) => `${formatUsd(price.unitPriceMicros)} per second of video`,
    estimateUnits: (args) => ({ units: args.durationSeconds }),
    plan: () => [{ name: 'generate', billed: true, external: true, timeoutMs: 5 * 60_000 }],
  });
}
