import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { AUDIO_TRANSCODE_LIMITS, type AudioTranscodeArgs } from '@tes/catalog';
import { StepError } from '@tes/core';
import { probeMedia } from '../media/ffprobe';
import { ProgramFailed, runProgram } from '../programs';
import type { RunnerOf, StepContext, StepResult } from '../runner';

/** The bounds the schema documents, from the tool definition itself. */
const L = AUDIO_TRANSCODE_LIMITS;
/** Sample rates libmp3lame accepts; any other input rate is resampled for MP3 output. */
const MP3_RATES = [8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000] as const;
/** A constant filter graph: no caller value ever reaches -af. */
const LOUDNORM = 'loudnorm=I=-16:TP=-1.5:LRA=11';

/** What the probe step learned about the input (small JSON, kept as its checkpoint). */
interface ProbeCheckpoint {
  inputDurationSeconds: number | null;
  inputSampleRate: number;
  inputChannels: number;
  sampleRate: number;
  channels: number;
}

export interface AudioFacts {
  durationSeconds: number;
  sampleRate: number;
  channels: number;
  codec: string;
}

/**
 * Facts of an audio file we produced. The duration is the count of DECODED samples (ffprobe
 * -show_frames) over the sample rate: an MP3's container duration includes the encoder's
 * priming and padding frames (a 1 s MP3 at 8 kHz reports 1.152 s), which would overcharge.
 * Rounded to the millisecond so resampling rounding never starts an extra billed second.
 */
export async function measureAudio(file: string, signal: AbortSignal): Promise<AudioFacts> {
  let facts: Awaited<ReturnType<typeof probeMedia>>;
  try {
    facts = await probeMedia(file, signal);
  } catch (err) {
    if (err instanceof StepError) throw new StepError('internal_error', 'the produced audio could not be measured');
    throw err;
  }
  const audio = facts.streams.find((s) => s.type === 'audio');
  if (!audio?.sampleRate || !audio.channels) throw new StepError('internal_error', 'the produced file has no audio stream');
  const { stdout } = await runProgram('ffprobe', ['-v', 'error', '-select_streams', 'a:0', '-show_entries', 'frame=nb_samples', '-of', 'csv=p=0', file], {
    signal,
    maxStdoutBytes: 8_000_000,
  });
  let samples = 0;
  for (const line of stdout.toString('utf8').split('\n')) {
    const n = Number.parseInt(line, 10);
    if (Number.isSafeInteger(n) && n > 0) samples += n;
  }
  return {
    durationSeconds: Math.round((samples / audio.sampleRate) * 1000) / 1000,
    sampleRate: audio.sampleRate,
    channels: audio.channels,
    codec: audio.codec,
  };
}

/** Fails the step when a produced file is over the artifact cap (nothing of it is stored). */
export async function assertArtifactSize(file: string, max: number): Promise<number> {
  const { size } = await stat(file);
  if (size > max) throw new StepError('artifact_too_large', `the output would be ${size} bytes, more than the ${max}-byte limit`);
  return size;
}

/**
 * Seconds as ffmpeg's time syntax. String(n) would give "1e-7" for tiny numbers, which
 * ffmpeg rejects; fixed notation with microseconds is always accepted.
 */
function ffTime(seconds: number): string {
  return seconds.toFixed(6);
}

function outputShape(a: AudioTranscodeArgs, inputRate: number, inputChannels: number): { sampleRate: number; channels: number } {
  let sampleRate = a.sampleRate ?? inputRate;
  if (a.format === 'mp3' && !(MP3_RATES as readonly number[]).includes(sampleRate)) {
    sampleRate = MP3_RATES.find((r) => r >= sampleRate) ?? 48000;
  }
  // libmp3lame encodes at most 2 channels; WAV keeps the input's layout unless asked.
  const channels = a.channels ?? (a.format === 'mp3' ? Math.min(2, inputChannels) : inputChannels);
  return { sampleRate, channels };
}

/** Zero-cost: decodes the input's facts, refuses what cannot produce output before paid work. */
async function probeInput(ctx: StepContext, a: AudioTranscodeArgs): Promise<ProbeCheckpoint> {
  const input = await ctx.inputFile(a.fileId);
  const info = await probeMedia(input.path, ctx.signal);
  const audio = info.streams.find((s) => s.type === 'audio');
  if (!audio) throw new StepError('invalid_input_file', 'the input file has no audio stream');
  if (!audio.sampleRate || !audio.channels) throw new StepError('invalid_input_file', 'the input audio stream has no sample rate or channel layout');
  const known = audio.durationSeconds ?? info.durationSeconds;
  const inputDurationSeconds = Number.isFinite(known) && known > 0 ? known : null;
  if (inputDurationSeconds !== null && a.startSeconds >= inputDurationSeconds) {
    throw new StepError('invalid_input_file', `startSeconds ${a.startSeconds} is at or past the end of the input audio (${inputDurationSeconds.toFixed(3)} s)`);
  }
  const shape = outputShape(a, audio.sampleRate, audio.channels);
  const longest = Math.min(a.durationSeconds ?? L.maxDurationSeconds, L.maxDurationSeconds, (inputDurationSeconds ?? Infinity) - a.startSeconds);
  // WAV size is known up front (16-bit PCM): refuse here, free, rather than after encoding.
  const wavBytes = 44 + Math.ceil(longest * shape.sampleRate) * shape.channels * 2;
  if (a.format === 'wav' && wavBytes > L.maxArtifactBytes) {
    throw new StepError(
      'artifact_too_large',
      `a ${longest.toFixed(1)} s WAV at ${shape.sampleRate} Hz x ${shape.channels} channels is ${wavBytes} bytes, more than ${L.maxArtifactBytes}; ask for mp3, fewer channels, a lower sampleRate or a shorter durationSeconds`,
    );
  }
  return { inputDurationSeconds, inputSampleRate: audio.sampleRate, inputChannels: audio.channels, ...shape };
}

async function transcodeAudio(ctx: StepContext, a: AudioTranscodeArgs, cp: ProbeCheckpoint): Promise<StepResult> {
  // Re-fetched rather than reused: a redelivery resumes here in a fresh workDir.
  const input = await ctx.inputFile(a.fileId);
  const out = path.join(ctx.workDir, `transcode-${ctx.index}.${a.format}`);
  const args = [
    '-nostdin',
    '-hide_banner',
    '-loglevel',
    'error',
    '-y',
    ...(a.startSeconds > 0 ? ['-ss', ffTime(a.startSeconds)] : []),
    '-i',
    input.path, // absolute path inside workDir: never read as an option
    '-map',
    '0:a:0',
    '-vn',
    '-sn',
    '-dn',
    '-map_metadata',
    '-1',
    '-t',
    ffTime(Math.min(a.durationSeconds ?? L.maxDurationSeconds, L.maxDurationSeconds)),
    // loudnorm resamples to 192 kHz internally and outputs that rate: -ar below is required.
    ...(a.normalize ? ['-af', LOUDNORM] : []),
    '-ar',
    String(cp.sampleRate),
    '-ac',
    String(cp.channels),
    ...(a.format === 'mp3' ? ['-c:a', 'libmp3lame', '-q:a', '2', '-f', 'mp3'] : ['-c:a', 'pcm_s16le', '-f', 'wav']),
    // Hard bound while writing, whatever the prediction said (e.g. a lying header).
    '-fs',
    String(L.maxArtifactBytes + 1),
    out,
  ];
  try {
    await runProgram('ffmpeg', args, { signal: ctx.signal, cwd: ctx.workDir, maxStdoutBytes: 64_000 });
  } catch (err) {
    // The command is fixed and the arguments validated: a failure is the input not decoding.
    if (err instanceof ProgramFailed) throw new StepError('invalid_input_file', 'the input audio could not be decoded');
    throw err;
  }
  await assertArtifactSize(out, L.maxArtifactBytes);
  const facts = await measureAudio(out, ctx.signal);
  if (facts.durationSeconds <= 0) throw new StepError('invalid_input_file', 'the selected range of the input holds no audio');
  const body = await readFile(out);
  return {
    units: Math.max(1, Math.ceil(facts.durationSeconds)),
    files: [{ format: a.format, mimeType: a.format === 'mp3' ? 'audio/mpeg' : 'audio/wav', body }],
    facts: { ...facts },
  };
}

/** audio.transcode: step 'probe' (free, ffprobe) then 'transcode' (ffmpeg, charged per started output second). */
export const audioTranscodeRunner: RunnerOf<'audio.transcode'> = {
  probe: async (ctx, a) => ({ units: 0, checkpoint: { ...(await probeInput(ctx, a)) } }),
  async transcode(ctx, a) {
    const cp = ctx.previous.find((s) => s.name === 'probe' && s.status === 'succeeded')?.checkpoint as ProbeCheckpoint | undefined;
    if (!cp || typeof cp.sampleRate !== 'number' || typeof cp.channels !== 'number') {
      throw new StepError('internal_error', 'the probe step left no facts');
    }
    return transcodeAudio(ctx, a, cp);
  },
};
