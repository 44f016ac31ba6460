import { ceilDiv, formatUsd, type InputFacts } from '@tes/core';
import { defineTool } from '../types';
import { imageFacts } from './facts';

export const IMAGE_TRANSFORM_LIMITS = {
  /** Output sides, whatever the operations. */
  maxOutputSide: 4096,
  /** Decoded input pixels (width x height) at most: bounds worker memory against decompression bombs. */
  maxInputPixels: 40_000_000,
  /** Largest input side a crop may refer to. */
  maxInputSide: 16_384,
  /** Encoded output bytes at most (artifact_too_large above). */
  maxOutputBytes: 50 * 1024 * 1024,
} as const;

const L = IMAGE_TRANSFORM_LIMITS;
export const FIT_MODES = ['cover', 'contain', 'fill', 'inside', 'outside'] as const;
export type FitMode = (typeof FIT_MODES)[number];
const MAX_OUTPUT_UNITS = ceilDiv(L.maxOutputSide * L.maxOutputSide, 1_000_000); // 17

/** image.transform's arguments as its schema admits them, defaults applied. */
export interface ImageTransformArgs {
  model: string;
  fileId: string;
  crop?: { left: number; top: number; width: number; height: number };
  resize?: { width: number; height: number; fit: FitMode };
  rotate: 0 | 90 | 180 | 270;
  format?: 'png' | 'jpeg';
  quality: number;
  background: string;
}

/** Started megapixels of a width x height image, at least 1. */
export function megapixelUnits(width: number, height: number): number {
  return Math.max(1, ceilDiv(width * height, 1_000_000));
}

/**
 * The most output pixels the arguments allow without the file: cover/contain/fill give exactly
 * the box, inside at most the box; outside and "no resize" depend on the input's aspect/size,
 * so they are bounded by the output cap (a crop bounds "no resize" too: rotation keeps the area).
 */
function maxTransformUnits(a: ImageTransformArgs): number {
  if (a.resize) {
    if (a.resize.fit === 'outside') return MAX_OUTPUT_UNITS;
    return megapixelUnits(a.resize.width, a.resize.height);
  }
  if (a.crop) return Math.min(MAX_OUTPUT_UNITS, megapixelUnits(a.crop.width, a.crop.height));
  return MAX_OUTPUT_UNITS;
}

/**
 * Output size of crop -> rotate -> resize for an upright input of `input` pixels, computed the
 * way sharp sizes its output, a fractional side rounded up: the quote prices it, and the worker
 * refuses an output above the cap with it before paid work (one function, so both agree).
 */
export function imageTransformOutput(input: { width: number; height: number }, a: ImageTransformArgs): { width: number; height: number } {
  const c = a.crop ?? input;
  const turned = a.rotate === 90 || a.rotate === 270;
  const w = turned ? c.height : c.width;
  const h = turned ? c.width : c.height;
  if (!a.resize) return { width: w, height: h };
  const { width: bw, height: bh, fit } = a.resize;
  if (fit === 'cover' || fit === 'contain' || fit === 'fill') return { width: bw, height: bh };
  const scale = fit === 'inside' ? Math.min(bw / w, bh / h) : Math.max(bw / w, bh / h);
  // sharp may round a fractional aspect-kept side up: allowed for (ceil after float noise is removed)
  const side = (n: number): number => Math.max(1, Math.ceil(Math.round(n * 1e6) / 1e6));
  return { width: side(w * scale), height: side(h * scale) };
}

/**
 * Started output megapixels of this input: from the upload's measured size when known (what
 * the run will produce), else the arguments' bound. Never above the output cap: a larger
 * planned output fails uncharged.
 */
function transformUnits(a: ImageTransformArgs, files: InputFacts): number {
  const image = imageFacts(files, a.fileId);
  if (!image) return maxTransformUnits(a);
  const out = imageTransformOutput(image, a);
  return Math.min(MAX_OUTPUT_UNITS, megapixelUnits(out.width, out.height));
}

const side = (max: number, description: string) => ({ type: 'integer', minimum: 1, maximum: max, description });

/**
 * image.transform: crop, rotate, resize and re-encode an uploaded PNG or JPEG with sharp.
 * Order: EXIF auto-orientation, crop, rotate, resize, encode. So crop coordinates refer to the
 * upright uploaded image and the resize box is the final output's box.
 */
export const imageTransform = defineTool<ImageTransformArgs>()({
  name: 'image.transform',
  category: 'image',
  description:
    'Crop, rotate, resize and convert an uploaded PNG or JPEG image (in that order, after EXIF auto-orientation). ' +
    `Output sides are 1..${L.maxOutputSide}; inputs up to ${L.maxInputPixels.toLocaleString('en-US')} pixels.`,
  unit: 'megapixel',
  steps: ['probe', 'transform'],
  inputSchema: {
    type: 'object',
    additionalProperties: false,
    required: ['fileId'],
    properties: {
      model: { type: 'string', enum: ['sharp'], default: 'sharp', description: 'Image library.' },
      fileId: {
        type: 'string',
        pattern: '^file_[0-9A-HJKMNP-TV-Z]{26}$',
        description: `An uploaded PNG or JPEG of this project, at most ${L.maxInputPixels.toLocaleString('en-US')} pixels once decoded; an undecodable file fails with invalid_input_file.`,
      },
      crop: {
        type: 'object',
        additionalProperties: false,
        required: ['left', 'top', 'width', 'height'],
        description:
          'Region of the (auto-oriented) input to keep, applied before rotate and resize. It must lie within the image; ' +
          'a region reaching outside fails the execution with invalid_input_file (nothing charged).',
        properties: {
          left: { type: 'integer', minimum: 0, maximum: L.maxInputSide - 1 },
          top: { type: 'integer', minimum: 0, maximum: L.maxInputSide - 1 },
          width: side(L.maxInputSide, `Crop width, 1..${L.maxInputSide}.`),
          height: side(L.maxInputSide, `Crop height, 1..${L.maxInputSide}.`),
        },
      },
      rotate: { type: 'integer', enum: [0, 90, 180, 270], default: 0, description: 'Clockwise rotation in degrees, applied after the crop.' },
      resize: {
        type: 'object',
        additionalProperties: false,
        required: ['width', 'height'],
        description:
          `Final output box (1..${L.maxOutputSide} per side). cover/contain/fill give exactly width x height, inside fits within it ` +
          `(keeping the aspect ratio), outside covers it (keeping the aspect ratio; fails with invalid_input_file if a side would exceed ${L.maxOutputSide}). ` +
          `Without resize the output keeps the cropped/rotated size, which must be at most ${L.maxOutputSide} per side.`,
        properties: {
          width: side(L.maxOutputSide, `Box width, 1..${L.maxOutputSide}.`),
          height: side(L.maxOutputSide, `Box height, 1..${L.maxOutputSide}.`),
          fit: { type: 'string', enum: [...FIT_MODES], default: 'inside' },
        },
      },
      format: { type: 'string', enum: ['png', 'jpeg'], description: 'Output format; the input format when omitted.' },
      quality: { type: 'integer', minimum: 1, maximum: 100, default: 90, description: 'JPEG quality 1..100 (ignored for PNG).' },
      background: {
        type: 'string',
        pattern: '^#[0-9a-fA-F]{6}$',
        default: '#ffffff',
        description: 'Padding colour for fit=contain, and what transparency is flattened onto in JPEG output.',
      },
    },
  },
  example: {
    fileId: 'file_01ARZ3NDEKTSV4RRFFQ69G5FAV',
    crop: { left: 10, top: 10, width: 300, height: 180 },
    rotate: 90,
    resize: { width: 360, height: 600, fit: 'cover' },
    format: 'jpeg',
    quality: 80,
  },
  models: [
    {
      id: 'sharp',
      description: 'libvips via sharp: PNG/JPEG decode, crop, rotate, resize, PNG/JPEG encode.',
      example: { fileId: 'file_01ARZ3NDEKTSV4RRFFQ69G5FAV', resize: { width: 256, height: 256, fit: 'contain' }, format: 'png' },
      available: true,
      requires: [],
    },
  ],
  describePrice: (p) => `${formatUsd(p.unitPriceMicros)} per started output megapixel, minimum ${formatUsd(p.minimumMicros)}`,
  estimateUnits: (args, files) => ({ units: transformUnits(args, files) }),
  // The probe reads headers and decodes once (no charge); the transform does the paid work
  // from the upload again, so a redelivery can resume at either step.
  plan: () => [
    { name: 'probe', timeoutMs: 60_000 },
    { name: 'transform', billed: true, timeoutMs: 120_000 },
  ],
  inputFiles: (args) => [{ fileId: args.fileId, formats: ['png', 'jpeg'], pointer: '/fileId' }],
});
