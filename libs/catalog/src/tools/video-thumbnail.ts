import { formatUsd } from '@tes/core';
import { defineTool } from '../types';

export const VIDEO_THUMBNAIL_LIMITS = {
  maxFrames: 10,
  maxTimeSeconds: 3600,
  minWidth: 16,
  maxWidth: 1920,
  /** Frame height cap: very tall videos come out narrower than `width` to keep within it. */
  maxHeight: 4096,
  /** Encoded bytes per PNG frame, and for all frames together (artifact_too_large above). */
  maxFrameBytes: 25 * 1024 * 1024,
  maxTotalBytes: 100 * 1024 * 1024,
} as const;

const L = VIDEO_THUMBNAIL_LIMITS;

/** video.thumbnail's arguments as its schema admits them. */
export interface VideoThumbnailArgs {
  model: string;
  fileId: string;
  times: number[];
  width?: number;
}

/**
 * video.thumbnail: one PNG per requested time of an uploaded MP4, with ffmpeg. Priced per
 * frame: the units are times.length, known from the arguments alone, and every requested
 * frame is produced or the execution fails (then nothing is charged).
 */
export const videoThumbnail = defineTool<VideoThumbnailArgs>()({
  name: 'video.thumbnail',
  category: 'video',
  description: `PNG frames of an uploaded MP4 at given times (1..${L.maxFrames} times, one artifact per time, in the order given).`,
  unit: 'frame',
  steps: ['probe', 'extract'],
  inputSchema: {
    type: 'object',
    additionalProperties: false,
    required: ['fileId', 'times'],
    properties: {
      model: { type: 'string', enum: ['ffmpeg'], default: 'ffmpeg', description: 'Decoder.' },
      fileId: {
        type: 'string',
        pattern: '^file_[0-9A-HJKMNP-TV-Z]{26}$',
        description: 'An uploaded MP4 of this project with a video stream; an undecodable file or one without video fails with invalid_input_file.',
      },
      times: {
        type: 'array',
        minItems: 1,
        maxItems: L.maxFrames,
        items: { type: 'number', minimum: 0, maximum: L.maxTimeSeconds },
        description:
          `1..${L.maxFrames} times in seconds (each 0..${L.maxTimeSeconds}); each gives the first frame at or after it. ` +
          "A time beyond the video's duration fails the execution with invalid_input_file before any frame is extracted " +
          '(nothing charged; times are not clamped). A time between the last frame and the end of the video gives the last frame.',
      },
      width: {
        type: 'integer',
        minimum: L.minWidth,
        maximum: L.maxWidth,
        description:
          `Frame width in pixels (${L.minWidth}..${L.maxWidth}); the height keeps the aspect ratio and is capped at ${L.maxHeight} ` +
          `(narrowing the frame). Without it, frames keep the video's width, scaled down to ${L.maxWidth} when wider.`,
      },
    },
  },
  example: { fileId: 'file_01ARZ3NDEKTSV4RRFFQ69G5FAV', times: [0, 1.5], width: 160 },
  models: [
    {
      id: 'ffmpeg',
      description: 'ffprobe to check the video, ffmpeg to seek and decode each frame to PNG.',
      example: { fileId: 'file_01ARZ3NDEKTSV4RRFFQ69G5FAV', times: [1] },
      available: true,
      requires: ['ffmpeg', 'ffprobe'],
    },
  ],
  describePrice: (p) => `${formatUsd(p.unitPriceMicros)} per frame, minimum ${formatUsd(p.minimumMicros)}`,
  estimateUnits: (args) => ({ units: args.times.length }),
  plan: (args) => [
    { name: 'probe', timeoutMs: 60_000 },
    { name: 'extract', billed: true, timeoutMs: 30_000 + 15_000 * args.times.length },
  ],
  inputFiles: (args) => [{ fileId: args.fileId, formats: ['mp4'], pointer: '/fileId' }],
});
