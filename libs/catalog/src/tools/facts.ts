import type { ImageFacts, InputFacts, MediaFacts } from '@tes/core';

/** The measured facts of an uploaded image the input names, if it has them. */
export function imageFacts(files: InputFacts, fileId: string): ImageFacts | undefined {
  const f = files.get(fileId);
  return f?.kind === 'image' ? f : undefined;
}

/** The measured facts of an uploaded audio or video file the input names, if it has them. */
export function mediaFacts(files: InputFacts, fileId: string): MediaFacts | undefined {
  const f = files.get(fileId);
  return f?.kind === 'media' ? f : undefined;
}

/**
 * Started seconds of a duration, at least 1, the way the worker bills a measured output: the
 * duration is first rounded to the millisecond, so float noise never starts an extra second.
 */
export function startedSecondsOf(seconds: number): number {
  return Math.max(1, Math.ceil(Math.round(seconds * 1000) / 1000));
}

/**
 * Frames of a constant-rate stream whose timestamps k/fps fall in a span of `seconds`
 * (rounded to the microsecond first, so 1 s at 25 fps is 25 frames, not 26).
 */
export function framesIn(seconds: number, fps: number): number {
  return Math.ceil(Math.round(seconds * fps * 1e6) / 1e6);
}
