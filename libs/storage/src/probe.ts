import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import sharp from 'sharp';
import type { AudioStreamFacts, FileFacts, MediaFacts, UploadFormat, VideoStreamFacts } from '@tes/core';

/**
 * What probing an upload found: its facts; `unreadable` when the bytes are not a file of the
 * declared kind that can be measured (the upload is refused); `unmeasured` when this machine
 * cannot measure it (no ffprobe): the upload is kept without facts.
 */
export type UploadProbe = { kind: 'facts'; facts: FileFacts } | { kind: 'unreadable'; reason: string } | { kind: 'unmeasured'; reason: string };

export interface ProbeOptions {
  /** Deadline for the whole probe; a file that takes longer to measure is unreadable. */
  timeoutMs: number;
  /** The ffprobe program (tests point it at a missing one). */
  ffprobe?: string;
}

interface FfprobeJson {
  format?: { duration?: string };
  streams?: {
    codec_type?: string;
    codec_name?: string;
    width?: number;
    height?: number;
    sample_rate?: string;
    channels?: number;
    duration?: string;
    avg_frame_rate?: string;
  }[];
}

class ProgramMissing extends Error {}

/** Runs ffprobe on a file; its output is small JSON or CSV, never the file's bytes. */
function ffprobe(program: string, args: string[], signal: AbortSignal, maxBuffer: number): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(program, args, { signal, maxBuffer, encoding: 'utf8' }, (err, stdout) => {
      if (!err) resolve(stdout);
      else reject(err.code === 'ENOENT' ? new ProgramMissing(`${program} is not installed`) : err);
    });
  });
}

const positive = (v: unknown): number | null => {
  const n = typeof v === 'string' ? Number(v) : typeof v === 'number' ? v : NaN;
  return Number.isFinite(n) && n > 0 ? n : null;
};

/** "30000/1001" as a number; null for "0/0" or anything unreadable. */
function rate(fraction: string | undefined): number | null {
  const m = /^(\d+)\/(\d+)$/.exec(fraction ?? '');
  return m && Number(m[2]) > 0 ? positive(Number(m[1]) / Number(m[2])) : null;
}

/**
 * Audio and video: ffprobe's container and stream facts, and for the first audio stream its
 * decoded length (the sum of its frames' samples, the way the worker measures what it bills:
 * ffprobe decodes the audio, ~2 s for the largest upload on one core).
 */
async function probeMedia(file: string, needsAudio: boolean, program: string, signal: AbortSignal): Promise<UploadProbe> {
  let json: FfprobeJson;
  try {
    json = JSON.parse(
      await ffprobe(program, ['-v', 'error', '-print_format', 'json', '-show_format', '-show_streams', file], signal, 1_000_000),
    ) as FfprobeJson;
  } catch (err) {
    if (err instanceof ProgramMissing) return { kind: 'unmeasured', reason: err.message };
    return { kind: 'unreadable', reason: 'ffprobe could not read it' };
  }
  const streams = json.streams ?? [];
  const v = streams.find((s) => s.codec_type === 'video');
  const a = streams.find((s) => s.codec_type === 'audio');
  let video: VideoStreamFacts | null = null;
  if (v?.width && v.height) {
    video = { codec: v.codec_name ?? 'unknown', width: v.width, height: v.height, durationSeconds: positive(v.duration), frameRate: rate(v.avg_frame_rate) };
  }
  let audio: AudioStreamFacts | null = null;
  const sampleRate = positive(a?.sample_rate);
  if (a && sampleRate && a.channels) {
    let samples = 0;
    try {
      const csv = await ffprobe(
        program,
        ['-v', 'error', '-select_streams', 'a:0', '-show_entries', 'frame=nb_samples', '-of', 'csv=p=0', file],
        signal,
        16_000_000,
      );
      for (const line of csv.split('\n')) {
        const n = Number.parseInt(line, 10);
        if (Number.isSafeInteger(n) && n > 0) samples += n;
      }
    } catch {
      return { kind: 'unreadable', reason: 'its audio could not be decoded' };
    }
    audio = { codec: a.codec_name ?? 'unknown', sampleRate, channels: a.channels, decodedSeconds: Math.round((samples / sampleRate) * 1e6) / 1e6 };
  }
  if (!video && !audio) return { kind: 'unreadable', reason: 'it holds no audio or video stream' };
  if (needsAudio && !audio) return { kind: 'unreadable', reason: 'it holds no audio stream' };
  const facts: MediaFacts = { kind: 'media', durationSeconds: positive(json.format?.duration), video, audio };
  return { kind: 'facts', facts };
}

/** Images: the header's size, upright (EXIF orientation applied) as the image tools see it. Nothing is decoded. */
async function probeImage(bytes: Buffer): Promise<UploadProbe> {
  try {
    const meta = await sharp(bytes).metadata();
    const width = meta.autoOrient?.width ?? meta.width;
    const height = meta.autoOrient?.height ?? meta.height;
    if (!width || !height) return { kind: 'unreadable', reason: 'it declares no size' };
    return { kind: 'facts', facts: { kind: 'image', width, height } };
  } catch {
    return { kind: 'unreadable', reason: 'its header could not be read' };
  }
}

/**
 * Measures an upload whose magic bytes matched `format` (what quotes are computed from; see
 * FileFacts). Audio and video go through ffprobe from a private temporary file (an MP4 whose
 * index is at its end cannot be read from a pipe), removed afterwards.
 */
export async function probeUpload(bytes: Buffer, format: UploadFormat, options: ProbeOptions): Promise<UploadProbe> {
  if (format === 'png' || format === 'jpeg') return probeImage(bytes);
  const dir = await mkdtemp(path.join(os.tmpdir(), 'tes-upload-'));
  const signal = AbortSignal.timeout(options.timeoutMs);
  try {
    const file = path.join(dir, `upload.${format}`);
    await writeFile(file, bytes, { mode: 0o600 });
    return await probeMedia(file, format !== 'mp4', options.ffprobe ?? 'ffprobe', signal);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
