import { VIDEO_THUMBNAIL_LIMITS, type VideoThumbnailArgs } from '@tes/catalog';
import { StepError } from '@tes/core';
import { probeMedia } from '../media/ffprobe';
import { ProgramFailed, runProgram } from '../programs';
import type { RunnerOf, StepContext } from '../runner';

/** The bounds the schema documents, from the tool definition itself. */
const L = VIDEO_THUMBNAIL_LIMITS;
/** ffprobe's packet list of a 12 MiB upload stays far below this; more means a hostile file. */
const MAX_PACKET_JSON_BYTES = 32 * 1024 * 1024;
/** Frames are more than this apart in any real video: seeking this far before the last frame finds it. */
const LAST_FRAME_MARGIN_S = 0.001;
const PNG_MAGIC = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

interface Plan {
  durationSeconds: number;
  /** Time of the last video frame, relative to the file's start (what ffmpeg's -ss means). */
  lastFrameSeconds: number;
  width: number;
  height: number;
}

/** Output frame size: `width` (or the source width, at most maxWidth) keeping the aspect ratio, height capped. */
function frameSize(srcW: number, srcH: number, width: number | undefined): { width: number; height: number } {
  let w = width ?? Math.min(srcW, L.maxWidth);
  let h = Math.max(1, Math.round((srcH * w) / srcW));
  if (h > L.maxHeight) {
    h = L.maxHeight;
    w = Math.max(1, Math.round((srcW * h) / srcH));
  }
  return { width: w, height: h };
}

async function lastFrameTime(path: string, signal: AbortSignal): Promise<number> {
  let json: { packets?: { pts_time?: string }[]; format?: { start_time?: string } };
  try {
    const { stdout } = await runProgram(
      'ffprobe',
      ['-v', 'error', '-select_streams', 'v:0', '-show_entries', 'packet=pts_time:format=start_time', '-of', 'json', path],
      { signal, maxStdoutBytes: MAX_PACKET_JSON_BYTES },
    );
    json = JSON.parse(stdout.toString('utf8')) as typeof json;
  } catch (err) {
    if (err instanceof ProgramFailed || err instanceof SyntaxError) throw new StepError('invalid_input_file', 'the video stream could not be read');
    if (err instanceof StepError && err.errorCode === 'artifact_too_large') throw new StepError('invalid_input_file', 'the video has too many frames');
    throw err;
  }
  // Packets come in decode order (B-frames): the last shown frame has the largest pts.
  let last = -Infinity;
  for (const p of json.packets ?? []) {
    const t = Number(p.pts_time);
    if (Number.isFinite(t) && t > last) last = t;
  }
  if (last === -Infinity) throw new StepError('invalid_input_file', 'the video stream has no frames');
  const start = Number(json.format?.start_time);
  return Math.max(0, last - (Number.isFinite(start) ? start : 0));
}

/**
 * Decodes the container (ffprobe) and checks the arguments against it. Run by both steps so
 * the paid step never depends on state the probe left behind (a redelivery may skip it).
 */
async function inspect(ctx: StepContext, a: VideoThumbnailArgs, path: string): Promise<Plan> {
  const info = await probeMedia(path, ctx.signal);
  const video = info.streams.find((s) => s.type === 'video');
  if (!video) throw new StepError('invalid_input_file', 'the input file has no video stream');
  if (!video.width || !video.height) throw new StepError('invalid_input_file', 'the video stream has no dimensions');
  const lastFrameSeconds = await lastFrameTime(path, ctx.signal);
  const durationSeconds = video.durationSeconds || info.durationSeconds || lastFrameSeconds;
  const late = a.times.filter((t) => t > durationSeconds);
  if (late.length > 0) {
    // Chosen over clamping: a caller asking past the end gets a clear failure, not frames
    // they did not ask for (and pays nothing).
    throw new StepError('invalid_input_file', `time ${late.join(', ')} s is beyond the video's duration of ${durationSeconds.toFixed(3)} s`);
  }
  return { durationSeconds, lastFrameSeconds, ...frameSize(video.width, video.height, a.width) };
}

async function extractFrame(ctx: StepContext, path: string, time: number, plan: Plan): Promise<Buffer> {
  const seek = Math.min(time, Math.max(0, plan.lastFrameSeconds - LAST_FRAME_MARGIN_S));
  // Numbers only reach the command line, formatted here: no caller text becomes an option or filter.
  const args = [
    '-hide_banner',
    '-nostdin',
    '-v',
    'error',
    '-ss',
    seek.toFixed(6),
    '-i',
    path,
    '-map',
    '0:v:0',
    '-frames:v',
    '1',
    '-vf',
    `scale=${plan.width}:${plan.height}:flags=bicubic,setsar=1`,
    '-pix_fmt',
    'rgb24',
    '-f',
    'image2pipe',
    '-c:v',
    'png',
    'pipe:1',
  ];
  let out: Buffer;
  try {
    ({ stdout: out } = await runProgram('ffmpeg', args, { signal: ctx.signal, maxStdoutBytes: L.maxFrameBytes }));
  } catch (err) {
    if (err instanceof ProgramFailed) throw new StepError('invalid_input_file', `the frame at ${time} s could not be decoded`);
    throw err; // artifact_too_large from maxStdoutBytes, aborts
  }
  // ffmpeg exits 0 with no output when no frame was decoded at or after the seek point.
  if (out.length < PNG_MAGIC.length || !out.subarray(0, PNG_MAGIC.length).equals(PNG_MAGIC)) {
    throw new StepError('invalid_input_file', `no frame could be decoded at ${time} s`);
  }
  return out;
}

/** video.thumbnail: 'probe' (free: ffprobe checks) then 'extract' (one PNG per time, charged per frame). */
export const videoThumbnailRunner: RunnerOf<'video.thumbnail'> = {
  async probe(ctx, a) {
    const file = await ctx.inputFile(a.fileId);
    return { units: 0, checkpoint: { ...(await inspect(ctx, a, file.path)) } };
  },
  async extract(ctx, a) {
    const file = await ctx.inputFile(a.fileId);
    const plan = await inspect(ctx, a, file.path);
    const frames: Buffer[] = [];
    let total = 0;
    for (const time of a.times) {
      const png = await extractFrame(ctx, file.path, time, plan);
      total += png.length;
      if (total > L.maxTotalBytes) throw new StepError('artifact_too_large', `the frames exceed ${L.maxTotalBytes} bytes together`);
      frames.push(png);
    }
    if (ctx.signal.aborted) throw ctx.signal.reason;
    return {
      // Every requested frame exists here, so the actual units equal the quoted ones.
      units: frames.length,
      files: frames.map((body) => ({ format: 'png', mimeType: 'image/png', body })),
      facts: { frames: frames.length, width: plan.width, height: plan.height, durationSeconds: Number(plan.durationSeconds.toFixed(3)) },
    };
  },
};
