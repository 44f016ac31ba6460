import sharp from 'sharp';
import { IMAGE_GENERATE_LIMITS, OPENAI_IMAGE_MODEL, type ImageGenerateArgs as Args } from '@tes/catalog';
import { StepError } from '@tes/core';
import { falCancel, falCreate, falImagesOf, falPoll } from '../providers/fal';
import { openaiGenerateImages } from '../providers/openai';
import { REPLICATE_MAX_JOB_MS, replicateCancel, replicateCreate, replicatePoll } from '../providers/replicate';
import type { RunnerOf } from '../runner';
import { runModel, type HostedModel } from './generate';

const ASPECT = { '1024x1024': '1:1', '1024x1536': '2:3', '1536x1024': '3:2' } as const;

const MODELS: Record<string, HostedModel<Args>> = {
  'replicate/flux-schnell': {
    kind: 'job',
    create: (p, a) =>
      replicateCreate(p, 'black-forest-labs/flux-schnell', {
        prompt: a.prompt,
        num_outputs: a.count,
        aspect_ratio: ASPECT[a.size],
        output_format: a.format === 'jpeg' ? 'jpg' : 'png',
        ...(a.seed !== undefined ? { seed: a.seed } : {}),
      }),
    poll: (p, ref) => replicatePoll(p, ref),
    cancel: (p, ref) => replicateCancel(p, ref),
    maxJobMs: REPLICATE_MAX_JOB_MS,
  },
  'fal/flux-schnell': {
    kind: 'job',
    create: (p, a) => {
      const [width, height] = a.size.split('x').map(Number);
      return falCreate(p, 'fal-ai/flux/schnell', {
        prompt: a.prompt,
        num_images: a.count,
        image_size: { width, height },
        output_format: a.format,
        enable_safety_checker: true,
        ...(a.seed !== undefined ? { seed: a.seed } : {}),
      });
    },
    poll: (p, ref) => falPoll(p, 'fal-ai/flux/schnell', ref, falImagesOf),
    cancel: (p, ref) => falCancel(p, 'fal-ai/flux/schnell', ref),
  },
  'openai/gpt-image-1.5': openaiImages(OPENAI_IMAGE_MODEL),
  // retired by OpenAI: refused at quote and submit; one accepted before that fails at OpenAI, unbilled
  'openai/gpt-image-1': openaiImages('gpt-image-1'),
};

function openaiImages(model: string): HostedModel<Args> {
  return {
    kind: 'call',
    // an execution accepted before quality existed has none: OpenAI's medium, which its flat quote covered
    call: (p, a) => openaiGenerateImages(p, { model, prompt: a.prompt, n: a.count, size: a.size, quality: a.quality ?? 'medium', output_format: a.format }),
  };
}

/**
 * image.generate. Every returned file is decoded and re-encoded to the asked format with
 * sharp, so what is stored is a real image of that format whatever the provider sent.
 * Billed per image actually delivered (at most `count`); none delivered fails the step, unbilled.
 */
export const imageGenerateRunner: RunnerOf<'image.generate'> = {
  async generate(ctx, a) {
    const ran = await runModel(ctx, MODELS, a, { max: a.count, maxBytes: IMAGE_GENERATE_LIMITS.maxOutputBytes });
    if ('wait' in ran) return ran.wait;
    // Nothing delivered (a provider's safety filter can take every image): a failure, never the minimum charge.
    if (ran.files.length === 0) throw new StepError('provider_error', 'the provider returned no images (its safety filter may have removed them)');
    const files = [];
    for (const { body } of ran.files) {
      let image: sharp.Sharp;
      try {
        image = sharp(body, { limitInputPixels: 64_000_000, failOn: 'error' });
        await image.metadata();
      } catch {
        throw new StepError('provider_error', 'the provider returned a file that is not an image');
      }
      const data = await (a.format === 'jpeg' ? image.jpeg({ quality: 92 }) : image.png()).toBuffer().catch(() => {
        throw new StepError('provider_error', 'the provider returned a file that is not an image');
      });
      files.push({ format: a.format, mimeType: a.format === 'jpeg' ? 'image/jpeg' : 'image/png', body: data });
    }
    return {
      units: files.length,
      ...(ran.usage ? { usage: ran.usage } : {}),
      files,
      facts: { images: files.length, model: a.model },
    };
  },
};
