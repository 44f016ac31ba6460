import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import sharp from 'sharp';
import { startedSecondsOf, VIDEO_SLIDESHOW_LIMITS, type VideoSlide, type VideoSlideshowArgs } from '@tes/catalog';
import { StepError } from '@tes/core';
import { probeMedia } from '../media/ffprobe';
import { runProgram } from '../programs';
import type { InputFile, RunnerOf, StepContext } from '../runner';
import { textCardSvg } from './image-render';
import { h264OutputArgs, readVideoOutput } from './video-transcode';

/** The bounds the schema documents, from the tool definition itself. */
const L = VIDEO_SLIDESHOW_LIMITS;
const AUDIO_RATE = 48_000;

/**
 * Frames per slide from rounded cumulative boundaries, so rounding never accumulates: the
 * total is round(sum of seconds x fps) frames, within half a frame of the requested length.
 */
function slideFrames(seconds: number[], fps: number): number[] {
  let cumulative = 0;
  let previous = 0;
  return seconds.map((s) => {
    cumulative += s;
    const boundary = Math.round((Math.round(cumulative * 1e6) / 1e6) * fps);
    const frames = boundary - previous;
    previous = boundary;
    return frames;
  });
}

/** Downloads each distinct upload once per attempt. */
function fetcher(ctx: StepContext): (fileId: string) => Promise<InputFile> {
  const seen = new Map<string, Promise<InputFile>>();
  return (fileId) => {
    let p = seen.get(fileId);
    if (!p) {
      p = ctx.inputFile(fileId);
      seen.set(fileId, p);
    }
    return p;
  };
}

function decodeError(what: string, err: unknown): StepError {
  return new StepError('invalid_input_file', `${what} could not be decoded: ${(err as Error).message.slice(0, 200)}`);
}

/** Header-level checks of every upload: format, frame size, an audio stream. Costs nothing. */
async function probeInputs(a: VideoSlideshowArgs, get: (id: string) => Promise<InputFile>, signal: AbortSignal): Promise<void> {
  for (const [i, slide] of a.slides.entries()) {
    if (!slide.fileId) continue;
    const file = await get(slide.fileId);
    let meta: sharp.Metadata;
    try {
      meta = await sharp(file.path, { limitInputPixels: L.maxSlidePixels }).metadata();
    } catch (err) {
      throw decodeError(`slide ${i} (${slide.fileId})`, err);
    }
    if ((meta.format !== 'png' && meta.format !== 'jpeg') || !meta.width || !meta.height) {
      throw new StepError('invalid_input_file', `slide ${i} (${slide.fileId}) is not a PNG or JPEG image`);
    }
    if (meta.width * meta.height > L.maxSlidePixels) {
      throw new StepError(
        'invalid_input_file',
        `slide ${i} (${slide.fileId}) is ${meta.width}x${meta.height}; at most ${L.maxSlidePixels} pixels are accepted`,
      );
    }
    if (signal.aborted) throw signal.reason;
  }
  if (a.soundtrackFileId) {
    const file = await get(a.soundtrackFileId);
    const info = await probeMedia(file.path, signal);
    if (!info.streams.some((s) => s.type === 'audio')) throw new StepError('invalid_input_file', 'the soundtrack has no audio stream');
  }
}

/**
 * Each slide as an RGB PNG of exactly the frame size. Every slide must come out in the same
 * pixel format: the concat demuxer feeds them to one decoder, and a format change mid-stream
 * would make ffmpeg rebuild the filter graph. User text only ever reaches librsvg, escaped
 * by textCardSvg, never ffmpeg.
 */
async function renderSlide(a: VideoSlideshowArgs, slide: VideoSlide, index: number, get: (id: string) => Promise<InputFile>): Promise<Buffer> {
  const background = slide.background ?? '#000000';
  let source: sharp.Sharp;
  if (slide.fileId) {
    const file = await get(slide.fileId);
    source = sharp(file.path, { limitInputPixels: L.maxSlidePixels, failOn: 'error' }).rotate();
  } else {
    const svg = textCardSvg({
      model: 'sharp',
      text: slide.text ?? '',
      width: a.width,
      height: a.height,
      format: 'png',
      quality: 90,
      background,
      color: slide.color ?? '#ffffff',
      fontSize: Math.max(12, Math.round(a.height / 12)),
    });
    source = sharp(Buffer.from(svg, 'utf8'), { failOn: 'error' });
  }
  try {
    return await source
      .resize(a.width, a.height, { fit: 'contain', background })
      .flatten({ background })
      .toColourspace('srgb')
      .png({ compressionLevel: 6 })
      .toBuffer();
  } catch (err) {
    throw decodeError(slide.fileId ? `slide ${index} (${slide.fileId})` : `text card ${index}`, err);
  }
}

/**
 * video.slideshow. 'probe' checks every upload by decoding its header (free); 'render'
 * downloads again and does all the work itself, so a redelivery that resumes there needs
 * no file from an earlier attempt.
 */
export const videoSlideshowRunner: RunnerOf<'video.slideshow'> = {
  async probe(ctx, a) {
    await probeInputs(a, fetcher(ctx), ctx.signal);
    return { units: 0 };
  },
  async render(ctx, a) {
    const get = fetcher(ctx);
    const frames = slideFrames(
      a.slides.map((s) => s.seconds),
      a.fps,
    );
    const totalFrames = frames.reduce((x, y) => x + y, 0);
    const lines = ['ffconcat version 1.0'];
    for (const [i, slide] of a.slides.entries()) {
      const name = `slide-${String(i).padStart(3, '0')}.png`;
      await writeFile(path.join(ctx.workDir, name), await renderSlide(a, slide, i, get));
      if (ctx.signal.aborted) throw ctx.signal.reason;
      lines.push(`file ${name}`, `duration ${((frames[i] ?? 0) / a.fps).toFixed(9)}`);
    }
    // The concat demuxer gives the last entry no duration: repeat it so the fps filter has a
    // frame at the very end to fill up to, then trim at exactly totalFrames.
    lines.push(`file slide-${String(a.slides.length - 1).padStart(3, '0')}.png`, '');
    const list = path.join(ctx.workDir, 'slides.ffconcat');
    await writeFile(list, lines.join('\n'));

    const soundtrack = a.soundtrackFileId ? await get(a.soundtrackFileId) : undefined;
    const out = path.join(ctx.workDir, 'slideshow.mp4');
    const samples = Math.round((totalFrames / a.fps) * AUDIO_RATE);
    // Only numbers we computed and file names we chose go into the filter strings. Both
    // streams are cut by filters, not -frames:v: ffmpeg 5 closes every stream of the file
    // once one reaches its -frames limit, which would truncate the soundtrack.
    const args = [
      '-hide_banner',
      '-nostdin',
      '-loglevel',
      'error',
      '-y',
      '-f',
      'concat',
      '-i',
      list,
      ...(soundtrack ? ['-i', soundtrack.path] : []),
      '-map',
      '0:v:0',
      '-vf',
      `fps=${a.fps},trim=end_frame=${totalFrames},setsar=1,format=yuv420p`,
      ...(soundtrack
        ? ['-map', '1:a:0', '-af', `aformat=sample_rates=${AUDIO_RATE},apad=whole_len=${samples},atrim=end_sample=${samples}`, '-c:a', 'aac', '-b:a', '128k']
        : ['-an']),
      '-map_metadata',
      '-1',
      ...h264OutputArgs(23, L.maxOutputBytes, ['-tune', 'stillimage', '-r', String(a.fps)]),
      out,
    ];
    await runProgram('ffmpeg', args, { signal: ctx.signal, cwd: ctx.workDir });
    const video = await readVideoOutput(out, L.maxOutputBytes, ctx.signal, new StepError('internal_error', 'the slideshow came out without video frames'));
    return {
      units: startedSecondsOf(video.durationSeconds),
      files: [{ format: 'mp4', mimeType: 'video/mp4', body: video.body }],
      facts: { durationSeconds: video.durationSeconds, width: video.width, height: video.height, frames: totalFrames, audio: video.hasAudio },
    };
  },
};
