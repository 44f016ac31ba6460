import { formatUsd, type InputFacts } from '@tes/core';
import { defineTool } from '../types';
import { framesIn, mediaFacts, startedSecondsOf } from './facts';

export const VIDEO_TRANSCODE_LIMITS = {
  minWidth: 128,
  maxWidth: 1920,
  maxStartSeconds: 36_000,
  maxDurationSeconds: 300,
  minCrf: 18,
  maxCrf: 35,
  /** Largest input frame side decoded (a tiny file can declare a huge frame). */
  maxInputSide: 4096,
  /** Output frame height cap: a taller frame is fitted into width x maxHeight. */
  maxHeight: 1920,
  /** Output frame rate cap. */
  maxFps: 60,
  /** Encoded output bytes at most (artifact_too_large above). */
  maxOutputBytes: 50 * 1024 * 1024,
} as const;

const L = VIDEO_TRANSCODE_LIMITS;

/** video.transcode's arguments as its schema admits them, defaults applied. */
export interface VideoTranscodeArgs {
  model: string;
  fileId: string;
  width?: number;
  startSeconds: number;
  durationSeconds?: number;
  crf: number;
  audio: boolean;
}

/** The most output seconds an input can produce: the requested duration, else the cap. */
function maxSeconds(args: VideoTranscodeArgs): number {
  return args.durationSeconds ?? L.maxDurationSeconds;
}

/**
 * The longest output video stream this input gives, in seconds (the worker bills the output's
 * video stream). The worker asks ffmpeg for `span` = min(requested, container end - start);
 * the output holds the frames whose timestamps fall in it, so at a constant rate it lasts
 * whole frames: frames(span) when the cut is inside the video, frames(video end - start)
 * when the video runs out first (e.g. 1 s at 29.97 fps is 30 frames, 1.001 s). Checked
 * against ffmpeg 5.1 outputs over rates, starts and spans by tests/e2e/quote-fit.test.ts.
 * Without facts, the requested duration (or the cap).
 */
function transcodeSeconds(a: VideoTranscodeArgs, files: InputFacts): number {
  const requested = maxSeconds(a);
  const media = mediaFacts(files, a.fileId);
  const video = media?.video;
  const length = media?.durationSeconds;
  if (!video || !length) return requested;
  const span = Math.min(requested, length - a.startSeconds);
  const videoLeft = (video.durationSeconds ?? length) - a.startSeconds;
  if (span <= 0 || videoLeft <= 0) return 0; // fails uncharged: the start lies past the end
  const fps = video.frameRate === null ? null : Math.min(video.frameRate, L.maxFps);
  if (!fps) return Math.min(span, videoLeft);
  return Math.min(framesIn(span, fps), framesIn(videoLeft, fps)) / fps;
}

/**
 * video.transcode: an uploaded MP4 re-encoded to H.264 (+faststart), optionally resized
 * (aspect kept) and trimmed. Billed per started second of the output actually produced,
 * reserved for what the uploaded file gives under these arguments (see transcodeSeconds).
 */
export const videoTranscode = defineTool<VideoTranscodeArgs>()({
  name: 'video.transcode',
  category: 'video',
  description:
    `Resize and trim an uploaded MP4 to H.264 MP4 (AAC audio). At most ${L.maxDurationSeconds} s of output, ` +
    `at most ${L.maxWidth} px wide, 1920 px tall and 60 fps; the output is capped at 50 MiB.`,
  unit: 'second',
  steps: ['probe', 'transcode'],
  inputSchema: {
    type: 'object',
    additionalProperties: false,
    required: ['fileId'],
    properties: {
      model: { type: 'string', enum: ['ffmpeg'], default: 'ffmpeg', description: 'Encoder.' },
      fileId: {
        type: 'string',
        pattern: '^file_[0-9A-HJKMNP-TV-Z]{26}$',
        description: 'An uploaded MP4 with a video stream (frames at most 4096x4096).',
      },
      width: {
        type: 'integer',
        minimum: L.minWidth,
        maximum: L.maxWidth,
        multipleOf: 2,
        description:
          `Output width, even, ${L.minWidth} to ${L.maxWidth}; the height follows the aspect ratio (even). ` +
          'A frame that would be taller than 1920 px is fitted into width x 1920. ' +
          `Default: the input width, at most ${L.maxWidth}.`,
      },
      startSeconds: {
        type: 'number',
        minimum: 0,
        maximum: L.maxStartSeconds,
        default: 0,
        description: `Where the output starts in the input, 0 to ${L.maxStartSeconds} s; must lie before the input's end.`,
      },
      durationSeconds: {
        type: 'number',
        exclusiveMinimum: 0,
        maximum: L.maxDurationSeconds,
        description:
          `Output length, over 0 and at most ${L.maxDurationSeconds} s. Default: to the end of the input, at most ${L.maxDurationSeconds} s. ` +
          `The quote reserves the started seconds of the output this gives for the uploaded file (${L.maxDurationSeconds} s for a file uploaded without measured facts).`,
      },
      crf: { type: 'integer', minimum: L.minCrf, maximum: L.maxCrf, default: 23, description: `x264 constant rate factor, ${L.minCrf} (best) to ${L.maxCrf}.` },
      audio: { type: 'boolean', default: true, description: 'Keep the audio (encoded as AAC) when the input has any.' },
    },
  },
  example: { fileId: 'file_01ARZ3NDEKTSV4RRFFQ69G5FAV', width: 640, startSeconds: 0.5, durationSeconds: 1, crf: 28, audio: true },
  models: [
    {
      id: 'ffmpeg',
      description: 'ffmpeg with libx264 (yuv420p, +faststart) and AAC.',
      example: { fileId: 'file_01ARZ3NDEKTSV4RRFFQ69G5FAV', durationSeconds: 2, audio: false },
      available: true,
      requires: ['ffmpeg', 'ffprobe'],
    },
  ],
  describePrice: (p) => `${formatUsd(p.unitPriceMicros)} per started second of output, minimum ${formatUsd(p.minimumMicros)}`,
  estimateUnits: (args, files) => ({ units: startedSecondsOf(transcodeSeconds(args, files)) }),
  plan: (args) => [
    { name: 'probe', timeoutMs: 60_000 },
    // Decoding and encoding up to 1920 px wide; the allowance covers a slow core.
    { name: 'transcode', billed: true, timeoutMs: 120_000 + Math.ceil(maxSeconds(args)) * 4_000 },
  ],
  inputFiles: (args) => [{ fileId: args.fileId, formats: ['mp4'], pointer: '/fileId' }],
});
