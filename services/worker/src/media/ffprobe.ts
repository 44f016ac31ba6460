import { StepError } from '@tes/core';
import { ProgramFailed, runProgram } from '../programs';

export interface MediaStream {
  /** 'video', 'audio', or another kind ffprobe reports. */
  type: string;
  codec: string;
  width?: number;
  height?: number;
  sampleRate?: number;
  channels?: number;
  durationSeconds?: number;
}

export interface MediaInfo {
  formatName: string;
  durationSeconds: number;
  streams: MediaStream[];
}

interface FfprobeJson {
  format?: { format_name?: string; duration?: string };
  streams?: { codec_type?: string; codec_name?: string; width?: number; height?: number; sample_rate?: string; channels?: number; duration?: string }[];
}

/**
 * Decodes a media file's container and stream facts with ffprobe. A file ffprobe cannot
 * read fails the step with invalid_input_file (run before any paid work, so it costs nothing).
 */
export async function probeMedia(file: string, signal: AbortSignal): Promise<MediaInfo> {
  let json: FfprobeJson;
  try {
    const { stdout } = await runProgram('ffprobe', ['-v', 'error', '-print_format', 'json', '-show_format', '-show_streams', file], {
      signal,
      maxStdoutBytes: 1_000_000,
    });
    json = JSON.parse(stdout.toString('utf8')) as FfprobeJson;
  } catch (err) {
    if (err instanceof ProgramFailed || err instanceof SyntaxError) {
      throw new StepError('invalid_input_file', 'the input file could not be decoded');
    }
    throw err;
  }
  const streams = (json.streams ?? []).map((s) => ({
    type: s.codec_type ?? 'unknown',
    codec: s.codec_name ?? 'unknown',
    ...(s.width ? { width: s.width } : {}),
    ...(s.height ? { height: s.height } : {}),
    ...(s.sample_rate ? { sampleRate: Number(s.sample_rate) } : {}),
    ...(s.channels ? { channels: s.channels } : {}),
    ...(s.duration ? { durationSeconds: Number(s.duration) } : {}),
  }));
  const durationSeconds = Number(json.format?.duration ?? 0);
  if (streams.length === 0) throw new StepError('invalid_input_file', 'the input file has no audio or video stream');
  return { formatName: json.format?.format_name ?? 'unknown', durationSeconds: Number.isFinite(durationSeconds) ? durationSeconds : 0, streams };
}
