import { formatUsd } from '@tes/core';
import { defineTool } from '../types';

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
 * video.transcode: an uploaded MP4 re-encoded to H.264 (+faststart), optionally resized
 * (aspect kept) and trimmed. Billed per started second of the output actually produced,
 * reserved for the requested duration (or the 300 s cap when none is given).
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
        description: `Output length, over 0 and at most ${L.maxDurationSeconds} s. Default: to the end of the input, at most ${L.maxDurationSeconds} s.`,
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
  estimateUnits: (args) => ({ units: Math.max(1, Math.ceil(maxSeconds(args))) }),
  plan: (args) => [
    { name: 'probe', timeoutMs: 60_000 },
    // Decoding and encoding up to 1920 px wide; the allowance covers a slow core.
    { name: 'transcode', billed: true, timeoutMs: 120_000 + Math.ceil(maxSeconds(args)) * 4_000 },
  ],
  inputFiles: (args) => [{ fileId: args.fileId, formats: ['mp4'], pointer: '/fileId' }],
});
