import { formatUsd, type InputFacts } from '@tes/core';
import { defineTool } from '../types';
import { mediaFacts, startedSecondsOf } from './facts';

/** Bounds of audio.transcode: the schema documents them and the worker enforces these same values. */
export const AUDIO_TRANSCODE_LIMITS = {
  /** Longest output, and the duration billed at most when durationSeconds is not given. */
  maxDurationSeconds: 600,
  /**
   * Latest start point. An upload is at most 12 MiB; even an 8 kbit/s MP3 of that size lasts
   * ~3.5 h, so 12 h is past the end of any input while still bounding the number.
   */
  maxStartSeconds: 43_200,
  maxArtifactBytes: 50 * 1024 * 1024,
} as const;

export const AUDIO_SAMPLE_RATES = [8000, 16000, 22050, 44100, 48000] as const;

/** audio.transcode's arguments as its schema admits them, defaults applied. */
export interface AudioTranscodeArgs {
  model: string;
  fileId: string;
  format: 'wav' | 'mp3';
  startSeconds: number;
  durationSeconds?: number;
  normalize: boolean;
  sampleRate?: (typeof AUDIO_SAMPLE_RATES)[number];
  channels?: 1 | 2;
}

/**
 * An MP3 output read to the input's end from a start past 0 decodes up to ~3.3 ms longer than
 * the input span (the encoder's last frame after a seek; measured on ffmpeg 5.1 with libmp3lame
 * over WAV, MP3 and MP4 inputs, starts and rates): allowed for, so the quote still covers it.
 * From the start, WAV output, and a cut inside the input come out within the worker's
 * millisecond rounding.
 */
const MP3_TAIL_SECONDS = 0.005;

/**
 * The longest output this input gives: the requested span (durationSeconds, else the 600 s
 * cap) from startSeconds, ended early by the input's decoded end when the upload's facts
 * are known. A start at or past the end fails the run uncharged: one second is quoted.
 */
function audioSeconds(a: AudioTranscodeArgs, files: InputFacts): number {
  const requested = Math.min(a.durationSeconds ?? AUDIO_TRANSCODE_LIMITS.maxDurationSeconds, AUDIO_TRANSCODE_LIMITS.maxDurationSeconds);
  const audio = mediaFacts(files, a.fileId)?.audio;
  if (!audio) return requested;
  const rest = audio.decodedSeconds - a.startSeconds;
  if (rest <= 0) return 0;
  if (rest > requested) return requested;
  return Math.min(requested, rest + (a.format === 'mp3' && a.startSeconds > 0 ? MP3_TAIL_SECONDS : 0));
}

/**
 * audio.transcode: an uploaded WAV, MP3 or MP4 (its first audio track) to WAV or MP3 with
 * ffmpeg: trim, EBU R128 loudness normalisation, resampling, up/down-mixing. The charge is the
 * output's measured duration (decoded samples) in started seconds; the quote predicts it from
 * the upload's decoded duration (see audioSeconds), else from the arguments alone.
 */
export const audioTranscode = defineTool<AudioTranscodeArgs>()({
  name: 'audio.transcode',
  category: 'audio',
  description: 'Convert uploaded WAV, MP3 or MP4 audio to WAV or MP3, with trimming and loudness normalisation.',
  unit: 'second',
  steps: ['probe', 'transcode'],
  inputSchema: {
    type: 'object',
    additionalProperties: false,
    required: ['fileId', 'format'],
    properties: {
      model: { type: 'string', enum: ['ffmpeg'], default: 'ffmpeg', description: 'Transcoder.' },
      fileId: {
        type: 'string',
        pattern: '^file_[0-9A-HJKMNP-TV-Z]{26}$',
        description:
          'An uploaded WAV, MP3 or MP4 file of this project. For MP4 the first audio track is used; an MP4 without audio fails with invalid_input_file.',
      },
      format: { type: 'string', enum: ['wav', 'mp3'], description: 'wav: 16-bit PCM. mp3: libmp3lame VBR (at most 2 channels).' },
      startSeconds: {
        type: 'number',
        minimum: 0,
        maximum: AUDIO_TRANSCODE_LIMITS.maxStartSeconds,
        default: 0,
        description: `Where the output starts in the input, 0 to ${AUDIO_TRANSCODE_LIMITS.maxStartSeconds} seconds. At or past the input's end fails with invalid_input_file (not charged).`,
      },
      durationSeconds: {
        type: 'number',
        exclusiveMinimum: 0,
        maximum: AUDIO_TRANSCODE_LIMITS.maxDurationSeconds,
        description: `Output length, more than 0 and at most ${AUDIO_TRANSCODE_LIMITS.maxDurationSeconds} seconds. Default: to the input's end, cut at ${AUDIO_TRANSCODE_LIMITS.maxDurationSeconds} seconds. The quote reserves the started seconds of the output this gives for the uploaded file (${AUDIO_TRANSCODE_LIMITS.maxDurationSeconds} s for a file uploaded without measured facts).`,
      },
      normalize: {
        type: 'boolean',
        default: false,
        description: 'EBU R128 loudness normalisation (ffmpeg loudnorm: -16 LUFS integrated, -1.5 dBTP true peak).',
      },
      sampleRate: {
        type: 'integer',
        enum: [...AUDIO_SAMPLE_RATES],
        description: "Output sample rate in Hz. Default: the input's (for MP3, the nearest rate MP3 supports).",
      },
      channels: { type: 'integer', enum: [1, 2], description: "Output channels. Default: the input's (MP3: at most 2)." },
    },
  },
  example: { fileId: 'file_01ARZ3NDEKTSV4RRFFQ69G5FAV', format: 'mp3', startSeconds: 0, durationSeconds: 10, normalize: true },
  models: [
    {
      id: 'ffmpeg',
      description: 'ffmpeg 5 (libmp3lame, loudnorm); inputs checked with ffprobe before any paid work.',
      example: { fileId: 'file_01ARZ3NDEKTSV4RRFFQ69G5FAV', format: 'wav', sampleRate: 16000, channels: 1 },
      available: true,
      requires: ['ffmpeg', 'ffprobe'],
    },
  ],
  describePrice: (p) => `${formatUsd(p.unitPriceMicros)} per started second of output, minimum ${formatUsd(p.minimumMicros)}`,
  estimateUnits: (args, files) => ({ units: startedSecondsOf(audioSeconds(args, files)) }),
  plan: () => [
    { name: 'probe', timeoutMs: 30_000 },
    { name: 'transcode', billed: true, timeoutMs: 300_000 },
  ],
  inputFiles: (args) => [{ fileId: args.fileId, formats: ['wav', 'mp3', 'mp4'], pointer: '/fileId' }],
});
