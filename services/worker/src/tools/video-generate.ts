import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { startedSecondsOf, VIDEO_GENERATE_LIMITS, type VideoGenerateArgs as Args } from '@tes/catalog';
import { StepError } from '@tes/core';
import { probeMedia } from '../media/ffprobe';
import { falCancel, falCreate, falPoll } from '../providers/fal';
import { REPLICATE_MAX_JOB_MS, replicateCancel, replicateCreate, replicatePoll } from '../providers/replicate';
import type { RunnerOf } from '../runner';
import { runModel, type HostedModel } from './generate';

const FAL_MODEL = 'fal-ai/kling-video/v1/standard/text-to-video';

const MODELS: Record<string, HostedModel<Args>> = {
  'replicate/kling-v1.6-standard': {
    kind: 'job',
    create: (p, a) => replicateCreate(p, 'kwaivgi/kling-v1.6-standard', { prompt: a.prompt, duration: a.durationSeconds, aspect_ratio: a.aspectRatio }),
    poll: (p, ref) => replicatePoll(p, ref),
    cancel: (p, ref) => replicateCancel(p, ref),
    maxJobMs: REPLICATE_MAX_JOB_MS,
  },
  'fal/kling-video-v1-standard': {
    kind: 'job',
    create: (p, a) => falCreate(p, FAL_MODEL, { prompt: a.prompt, duration: String(a.durationSeconds), aspect_ratio: a.aspectRatio }),
    poll: (p, ref) =>
      falPoll(p, FAL_MODEL, ref, (r) => {
        const url = (r.video as { url?: unknown } | undefined)?.url;
        return typeof url === 'string' ? [url] : [];
      }),
    cancel: (p, ref) => falCancel(p, FAL_MODEL, ref),
  },
};

/**
 * video.generate. The returned file is checked with ffprobe (it must hold a video stream)
 * and billed per second actually delivered, at most the requested length.
 */
export const videoGenerateRunner: RunnerOf<'video.generate'> = {
  async generate(ctx, a) {
    const ran = await runModel(ctx, MODELS, a, { max: 1, maxBytes: VIDEO_GENERATE_LIMITS.maxOutputBytes });
    if ('wait' in ran) return ran.wait;
    const body = ran.files[0]?.body;
    if (!body) throw new StepError('provider_error', 'the provider returned no video');
    const file = path.join(ctx.workDir, 'generated.mp4');
    await writeFile(file, body);
    let info;
    try {
      info = await probeMedia(file, ctx.signal);
    } catch {
      throw new StepError('provider_error', 'the provider returned a file that is not a video');
    }
    const video = info.streams.find((s) => s.type === 'video');
    if (!video) throw new StepError('provider_error', 'the provider returned a file without a video stream');
    return {
      units: Math.min(a.durationSeconds, startedSecondsOf(info.durationSeconds)),
      files: [{ format: 'mp4', mimeType: 'video/mp4', body }],
      facts: { durationSeconds: info.durationSeconds, width: video.width ?? null, height: video.height ?? null, model: a.model },
    };
  },
};
