import sharp from 'sharp';
import { IMAGE_TRANSFORM_LIMITS, imageTransformOutput, megapixelUnits, type ImageTransformArgs } from '@tes/catalog';
import { StepError } from '@tes/core';
import type { RunnerOf, StepContext } from '../runner';

/** The bounds the schema documents, from the tool definition itself. */
const L = IMAGE_TRANSFORM_LIMITS;

interface Size {
  width: number;
  height: number;
}

interface Inspected {
  format: 'png' | 'jpeg';
  /** Upright (EXIF auto-oriented) input size. */
  input: Size;
  /** The output size the arguments give for this input (sharp may round by a pixel). */
  output: Size;
}

// failOn 'error': a truncated or corrupt file fails instead of yielding grey pixels.
const OPEN = { limitInputPixels: L.maxInputPixels, failOn: 'error', autoOrient: true } as const;

function undecodable(err: unknown): StepError {
  const msg = (err as Error).message?.split('\n')[0]?.slice(0, 200) ?? 'unknown error';
  return new StepError('invalid_input_file', `the input image could not be decoded: ${msg}`);
}

/**
 * Decodes the upload (headers, then every pixel: a file whose header is fine but whose data
 * is corrupt must fail here, before the paid step) and checks the arguments against it.
 * Both steps call it, so neither depends on what the other left in workDir.
 */
async function inspect(ctx: StepContext, a: ImageTransformArgs, path: string, fullDecode: boolean): Promise<Inspected> {
  let meta: sharp.Metadata;
  try {
    meta = await sharp(path, OPEN).metadata();
    if (fullDecode) await sharp(path, OPEN).stats();
  } catch (err) {
    throw undecodable(err);
  }
  if (ctx.signal.aborted) throw ctx.signal.reason;
  if (meta.format !== 'png' && meta.format !== 'jpeg') {
    throw new StepError('invalid_input_file', `the input is ${meta.format ?? 'of an unknown format'}, not a PNG or JPEG image`);
  }
  const width = meta.autoOrient?.width ?? meta.width;
  const height = meta.autoOrient?.height ?? meta.height;
  if (!width || !height) throw new StepError('invalid_input_file', 'the input image has no dimensions');
  if (width * height > L.maxInputPixels) {
    throw new StepError('invalid_input_file', `the input image has ${width}x${height} pixels, more than ${L.maxInputPixels}`);
  }
  const c = a.crop;
  if (c && (c.left + c.width > width || c.top + c.height > height)) {
    // Only knowable after decoding; the caller's error, reported as a bad input (nothing charged).
    throw new StepError('invalid_input_file', `crop ${c.width}x${c.height} at (${c.left},${c.top}) lies outside the ${width}x${height} input image`);
  }
  const output = imageTransformOutput({ width, height }, a);
  if (output.width > L.maxOutputSide || output.height > L.maxOutputSide) {
    throw new StepError(
      'invalid_input_file',
      `the output would be ${output.width}x${output.height}, above ${L.maxOutputSide} per side: give a smaller resize box or crop`,
    );
  }
  return { format: meta.format, input: { width, height }, output };
}

function rgb(hex: string): { r: number; g: number; b: number } {
  const n = Number.parseInt(hex.slice(1), 16);
  return { r: (n >> 16) & 255, g: (n >> 8) & 255, b: n & 255 };
}

/**
 * Two pipelines so the operation order is explicit: sharp orders rotate/resize in one
 * pipeline by its own rules. Stage 1 crops and resizes to the box turned by the rotation
 * (equivalent to rotate-then-resize for all fit modes), stage 2 rotates and encodes. The raw
 * intermediate is at most maxOutputSide^2 x 4 bytes (67 MB), because the output was bounded.
 */
async function transform(path: string, a: ImageTransformArgs, format: 'png' | 'jpeg'): Promise<{ data: Buffer; info: sharp.OutputInfo }> {
  const bg = { ...rgb(a.background), alpha: 1 };
  const turned = a.rotate === 90 || a.rotate === 270;
  let first = sharp(path, OPEN);
  if (a.crop) first = first.extract(a.crop);
  if (a.resize) {
    const [w, h] = turned ? [a.resize.height, a.resize.width] : [a.resize.width, a.resize.height];
    first = first.resize(w, h, { fit: a.resize.fit, background: bg });
  }
  let raw: { data: Buffer; info: sharp.OutputInfo };
  try {
    raw = await first.raw({ depth: 'uchar' }).toBuffer({ resolveWithObject: true });
  } catch (err) {
    throw undecodable(err);
  }
  const channels = raw.info.channels;
  let second = sharp(raw.data, { raw: { width: raw.info.width, height: raw.info.height, channels } });
  if (a.rotate !== 0) second = second.rotate(a.rotate);
  second = format === 'jpeg' ? second.flatten({ background: bg }).jpeg({ quality: a.quality }) : second.png();
  return second.toBuffer({ resolveWithObject: true });
}

/** image.transform: 'probe' (free: decode and check) then 'transform' (charged per actual output megapixel). */
export const imageTransformRunner: RunnerOf<'image.transform'> = {
  async probe(ctx, a) {
    const file = await ctx.inputFile(a.fileId);
    const info = await inspect(ctx, a, file.path, true);
    return { units: 0, checkpoint: { input: info.input, format: info.format } };
  },
  async transform(ctx, a) {
    const file = await ctx.inputFile(a.fileId);
    const info = await inspect(ctx, a, file.path, false);
    const format = a.format ?? info.format;
    const out = await transform(file.path, a, format);
    if (ctx.signal.aborted) throw ctx.signal.reason;
    // Safety net behind imageTransformOutput: sharp's own rounding must not slip past the cap.
    if (out.info.width > L.maxOutputSide || out.info.height > L.maxOutputSide) {
      throw new StepError('artifact_too_large', `the output is ${out.info.width}x${out.info.height}, above ${L.maxOutputSide} per side`);
    }
    if (out.data.length > L.maxOutputBytes) {
      throw new StepError('artifact_too_large', `the output is ${out.data.length} bytes, above ${L.maxOutputBytes}`);
    }
    // Billed on the ACTUAL output; the engine caps the cost at the reservation (the quote's maximum).
    const units = megapixelUnits(out.info.width, out.info.height);
    return {
      units,
      files: [{ format, mimeType: format === 'jpeg' ? 'image/jpeg' : 'image/png', body: out.data }],
      facts: { width: out.info.width, height: out.info.height, format, megapixels: units },
    };
  },
};
