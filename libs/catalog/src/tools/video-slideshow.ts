import { AppError, formatUsd } from '@tes/core';
import { defineTool, type InputFileRef } from '../types';

export const VIDEO_SLIDESHOW_LIMITS = {
  maxSlides: 20,
  minSlideSeconds: 0.5,
  maxSlideSeconds: 30,
  maxTotalSeconds: 300,
  maxTextChars: 500,
  minWidth: 128,
  maxWidth: 1920,
  minHeight: 128,
  maxHeight: 1080,
  /** Decoded pixels of an uploaded slide image at most (a small PNG can declare a huge canvas). */
  maxSlidePixels: 40_000_000,
  /** Encoded output bytes at most (artifact_too_large above). */
  maxOutputBytes: 50 * 1024 * 1024,
} as const;

const L = VIDEO_SLIDESHOW_LIMITS;
const FILE_ID = '^file_[0-9A-HJKMNP-TV-Z]{26}$';
const HEX_COLOR = '^#[0-9a-fA-F]{6}$';

/** One slide: exactly one of an uploaded image and a text card. */
export interface VideoSlide {
  fileId?: string;
  text?: string;
  seconds: number;
  background?: string;
  color?: string;
}

/** video.slideshow's arguments as its schema admits them, defaults applied. */
export interface VideoSlideshowArgs {
  model: string;
  slides: VideoSlide[];
  soundtrackFileId?: string;
  width: number;
  height: number;
  fps: number;
}

/**
 * Sum of the slide durations: the output length the quote reserves for. Rounded to the
 * microsecond so float noise (0.1 + 0.2) never starts an extra billed second.
 */
function slideshowSeconds(args: VideoSlideshowArgs): number {
  const sum = args.slides.reduce((acc, s) => acc + s.seconds, 0);
  return Math.round(sum * 1e6) / 1e6;
}

/**
 * JSON Schema cannot bound a sum, so the total-duration cap is checked here; resolve()
 * calls plan() on every quote and submit, so an over-long show is a 400 before anything
 * is reserved. Stored arguments were checked on submit, so the worker never trips this.
 */
function checkTotal(args: VideoSlideshowArgs): void {
  const total = slideshowSeconds(args);
  if (total > L.maxTotalSeconds) {
    throw new AppError('invalid_arguments', 'invalid_arguments', {
      details: {
        errors: [
          {
            instancePath: '/slides',
            keyword: 'maxTotalSeconds',
            message: `the slides last ${total} s in total; at most ${L.maxTotalSeconds} s`,
            params: { limit: L.maxTotalSeconds },
          },
        ],
      },
    });
  }
}

/**
 * video.slideshow: uploaded PNG/JPEG images and text cards (rendered with sharp, never
 * passed to ffmpeg as text), each letterboxed into the frame for its duration, with an
 * optional uploaded soundtrack trimmed or padded with silence to the video's length.
 */
export const videoSlideshow = defineTool<VideoSlideshowArgs>()({
  name: 'video.slideshow',
  category: 'video',
  description:
    `Uploaded images and text cards, with an optional soundtrack, to an H.264 MP4. At most ${L.maxSlides} slides and ` +
    `${L.maxTotalSeconds} s in total; the output is capped at 50 MiB.`,
  unit: 'second',
  steps: ['probe', 'render'],
  inputSchema: {
    type: 'object',
    additionalProperties: false,
    required: ['slides'],
    properties: {
      model: { type: 'string', enum: ['ffmpeg'], default: 'ffmpeg', description: 'Encoder.' },
      slides: {
        type: 'array',
        minItems: 1,
        maxItems: L.maxSlides,
        description: `1 to ${L.maxSlides} slides, shown in order. The durations may add up to at most ${L.maxTotalSeconds} s.`,
        items: {
          type: 'object',
          additionalProperties: false,
          required: ['seconds'],
          properties: {
            fileId: {
              type: 'string',
              pattern: FILE_ID,
              description: 'An uploaded PNG or JPEG image (at most 40 megapixels), scaled and letterboxed into the frame.',
            },
            text: {
              type: 'string',
              minLength: 1,
              maxLength: L.maxTextChars,
              description: `A text card (1 to ${L.maxTextChars} characters), wrapped to the frame; lines that do not fit are dropped.`,
            },
            seconds: {
              type: 'number',
              minimum: L.minSlideSeconds,
              maximum: L.maxSlideSeconds,
              description: `How long the slide is shown, ${L.minSlideSeconds} to ${L.maxSlideSeconds} s (rounded to whole frames).`,
            },
            background: { type: 'string', pattern: HEX_COLOR, description: 'Card colour, or the letterbox colour of an image. Default #000000.' },
            color: { type: 'string', pattern: HEX_COLOR, description: 'Text colour of a card (text slides only). Default #ffffff.' },
          },
          oneOf: [{ required: ['fileId'] }, { required: ['text'] }],
          dependentRequired: { color: ['text'] },
        },
      },
      soundtrackFileId: {
        type: 'string',
        pattern: FILE_ID,
        description: 'An uploaded WAV or MP3, encoded as AAC; cut at the end of the video or padded with silence to it.',
      },
      width: {
        type: 'integer',
        minimum: L.minWidth,
        maximum: L.maxWidth,
        multipleOf: 2,
        default: 1280,
        description: `Frame width, even, ${L.minWidth} to ${L.maxWidth}.`,
      },
      height: {
        type: 'integer',
        minimum: L.minHeight,
        maximum: L.maxHeight,
        multipleOf: 2,
        default: 720,
        description: `Frame height, even, ${L.minHeight} to ${L.maxHeight}.`,
      },
      fps: { type: 'integer', enum: [24, 25, 30], default: 25, description: 'Frames per second.' },
    },
  },
  example: {
    slides: [
      { text: 'Quarterly update', seconds: 2, background: '#1d3557', color: '#f1faee' },
      { fileId: 'file_01ARZ3NDEKTSV4RRFFQ69G5FAV', seconds: 3 },
    ],
    soundtrackFileId: 'file_01ARZ3NDEKTSV4RRFFQ69G5FAV',
    width: 1280,
    height: 720,
    fps: 25,
  },
  models: [
    {
      id: 'ffmpeg',
      description: 'ffmpeg with libx264 (yuv420p, +faststart) and AAC; text cards rendered with sharp.',
      example: { slides: [{ text: 'Hello', seconds: 1 }], width: 640, height: 360 },
      available: true,
      requires: ['ffmpeg', 'ffprobe'],
    },
  ],
  describePrice: (p) => `${formatUsd(p.unitPriceMicros)} per started second of video, minimum ${formatUsd(p.minimumMicros)}`,
  estimateUnits: (args) => {
    checkTotal(args);
    return { units: Math.max(1, Math.ceil(slideshowSeconds(args))) };
  },
  plan: (args) => {
    checkTotal(args);
    const seconds = slideshowSeconds(args);
    return [
      { name: 'probe', timeoutMs: 60_000 },
      // Encoding still frames runs far faster than real time; the allowance covers 1080p on a slow core.
      { name: 'render', billed: true, timeoutMs: 120_000 + Math.ceil(seconds) * 3_000 },
    ];
  },
  inputFiles: (args) => {
    const refs: InputFileRef[] = [];
    args.slides.forEach((s, i) => {
      if (s.fileId !== undefined) refs.push({ fileId: s.fileId, formats: ['png', 'jpeg'], pointer: `/slides/${i}/fileId` });
    });
    if (args.soundtrackFileId !== undefined) refs.push({ fileId: args.soundtrackFileId, formats: ['wav', 'mp3'], pointer: '/soundtrackFileId' });
    return refs;
  },
});
