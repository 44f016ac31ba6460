import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { startedSecondsOf, VIDEO_TRANSCODE_LIMITS, type VideoTranscodeArgs } from '@tes/catalog';
import { StepError } from '@tes/core';
import { probeMedia, type MediaInfo, type MediaStream } from '../media/ffprobe';
import { ProgramFailed, runProgram } from '../programs';
import type { RunnerOf } from '../runner';

/** The bounds the schema documents, from the tool definition itself. */
const L = VIDEO_TRANSCODE_LIMITS;

/** ffmpeg time values as fixed decimals: String(1e-7) would be "1e-7", which ffmpeg rejects. */
const secondsArg = (s: number): string => s.toFixed(6);

/** Billable seconds of a measured duration: started seconds, ignoring sub-millisecond float noise. */

export interface VideoOutput {
  body: Buffer;
  durationSeconds: number;
  width: number;
  height: number;
  hasAudio: boolean;
}

/**
 * Reads an encoded MP4 back: refuses one over the tool's size cap `maxBytes` (ffmpeg's -fs only
 * stops writing once past it, so a truncated file is also over it), then measures it with ffprobe. The
 * billed duration is the video stream's: AAC priming can make the container a few ms longer.
 * An output without video frames fails with `empty` (whose fault that is depends on the tool).
 */
export async function readVideoOutput(file: string, maxBytes: number, signal: AbortSignal, empty: StepError): Promise<VideoOutput> {
  const size = (await stat(file)).size;
  if (size > maxBytes) throw new StepError('artifact_too_large', `the video would be larger than ${maxBytes} bytes`);
  let info: MediaInfo;
  try {
    info = await probeMedia(file, signal);
  } catch (err) {
    if (err instanceof StepError) throw empty;
    throw err;
  }
  const video = info.streams.find((s) => s.type === 'video');
  const durationSeconds = video?.durationSeconds ?? info.durationSeconds;
  if (!video?.width || !video.height || !(durationSeconds > 0)) throw empty;
  if (video.codec !== 'h264') throw new StepError('internal_error', `the encoded video is ${video.codec}, not H.264`);
  return {
    body: await readFile(file),
    durationSeconds: Math.round(durationSeconds * 1000) / 1000,
    width: video.width,
    height: video.height,
    hasAudio: info.streams.some((s) => s.type === 'audio'),
  };
}

/** Output options shared by the video tools: H.264 yuv420p, moov first, capped at the tool's `maxBytes`. */
export function h264OutputArgs(crf: number, maxBytes: number, extra: string[] = []): string[] {
  return ['-c:v', 'libx264', '-preset', 'veryfast', '-crf', String(crf), '-pix_fmt', 'yuv420p', ...extra, '-movflags', '+faststart', '-fs', String(maxBytes)];
}

interface Checked {
  info: MediaInfo;
  video: MediaStream & { width: number; height: number };
  hasAudio: boolean;
  /** Output length to ask ffmpeg for. */
  seconds: number;
}

/** Decodes the upload's facts and checks the arguments against them (free: before paid work). */
async function checkInput(a: VideoTranscodeArgs, file: string, signal: AbortSignal): Promise<Checked> {
  const info = await probeMedia(file, signal);
  const video = info.streams.find((s) => s.type === 'video');
  if (!video) throw new StepError('invalid_input_file', 'the MP4 has no video stream');
  if (!video.width || !video.height) throw new StepError('invalid_input_file', 'the MP4 video stream has no frame size');
  if (video.width > L.maxInputSide || video.height > L.maxInputSide) {
    throw new StepError('invalid_input_file', `the MP4 frames are ${video.width}x${video.height}; at most ${L.maxInputSide}x${L.maxInputSide} is accepted`);
  }
  const sized = { ...video, width: video.width, height: video.height };
  const length = info.durationSeconds;
  if (!(length > 0)) throw new StepError('invalid_input_file', 'the MP4 has no duration');
  if (a.startSeconds >= length) {
    throw new StepError('invalid_input_file', `startSeconds (${a.startSeconds}) is at or beyond the end of the video (${length.toFixed(3)} s)`);
  }
  const seconds = Math.min(a.durationSeconds ?? L.maxDurationSeconds, L.maxDurationSeconds, length - a.startSeconds);
  return { info, video: sized, hasAudio: a.audio && info.streams.some((s) => s.type === 'audio'), seconds };
}

/**
 * video.transcode. 'probe' checks the upload (costs nothing); 'transcode' re-downloads and
 * re-probes it, so a redelivery that resumes there needs nothing from the earlier attempt.
 * The arguments reach ffmpeg only as validated numbers.
 */
export const videoTranscodeRunner: RunnerOf<'video.transcode'> = {
  async probe(ctx, a) {
    const input = await ctx.inputFile(a.fileId);
    const checked = await checkInput(a, input.path, ctx.signal);
    return { units: 0, checkpoint: { inputSeconds: checked.info.durationSeconds, hasAudio: checked.hasAudio } };
  },
  async transcode(ctx, a) {
    const input = await ctx.inputFile(a.fileId);
    const checked = await checkInput(a, input.path, ctx.signal);
    const width = a.width ?? Math.min(L.maxWidth, Math.max(2, checked.video.width - (checked.video.width % 2)));
    // Fit into width x maxHeight keeping the aspect: a normal frame gets exactly `width`, a very
    // tall one is bounded in height. All values are integers we computed.
    const vf = `scale=w=${width}:h=${L.maxHeight}:force_original_aspect_ratio=decrease:force_divisible_by=2,setsar=1,format=yuv420p`;
    const out = path.join(ctx.workDir, 'transcode-out.mp4');
    const args = [
      '-hide_banner',
      '-nostdin',
      '-loglevel',
      'error',
      '-y',
      '-ss',
      secondsArg(a.startSeconds),
      '-i',
      input.path,
      '-t',
      secondsArg(checked.seconds),
      '-map',
      '0:v:0',
      ...(checked.hasAudio ? ['-map', '0:a:0', '-c:a', 'aac', '-b:a', '128k'] : ['-an']),
      '-sn',
      '-dn',
      '-map_metadata',
      '-1',
      '-vf',
      vf,
      '-fpsmax',
      String(L.maxFps),
      ...h264OutputArgs(a.crf, L.maxOutputBytes),
      out,
    ];
    try {
      await runProgram('ffmpeg', args, { signal: ctx.signal, cwd: ctx.workDir });
    } catch (err) {
      // The header probed fine, so a decode failure here is the upload's fault.
      if (err instanceof ProgramFailed) throw new StepError('invalid_input_file', `the MP4 could not be transcoded: ${err.message.slice(0, 200)}`);
      throw err;
    }
    const video = await readVideoOutput(
      out,
      L.maxOutputBytes,
      ctx.signal,
      new StepError('invalid_input_file', 'the MP4 has no video frames at or after startSeconds'),
    );
    return {
      units: startedSecondsOf(video.durationSeconds),
      files: [{ format: 'mp4', mimeType: 'video/mp4', body: video.body }],
      facts: { durationSeconds: video.durationSeconds, width: video.width, height: video.height, audio: video.hasAudio },
    };
  },
};
