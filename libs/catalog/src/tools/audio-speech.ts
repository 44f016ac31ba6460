import { ceilDiv, formatUsd } from '@tes/core';
import { defineTool, type ProviderAvailability } from '../types';

/**
 * espeak-ng voices offered (each checked to exist in espeak-ng 1.51's data). The schema
 * enum is the only way a voice name reaches espeak-ng's argv, so no caller string can be
 * read there as an option or a path.
 */
const SPEECH_VOICES = [
  'en-us',
  'en-gb',
  'en-gb-scotland',
  'en-gb-x-rp',
  'en-029',
  'de',
  'fr-fr',
  'fr-be',
  'es',
  'es-419',
  'it',
  'pt',
  'pt-br',
  'nl',
  'sv',
  'da',
  'nb',
  'fi',
  'pl',
  'cs',
  'ru',
  'uk',
  'el',
  'tr',
  'hi',
  'ar',
  'ja',
  'ko',
  'cmn',
  'vi',
] as const;

/** OpenAI text-to-speech voices (audio/speech). */
const OPENAI_SPEECH_VOICES = ['alloy', 'ash', 'ballad', 'coral', 'echo', 'fable', 'nova', 'onyx', 'sage', 'shimmer'] as const;
export const OPENAI_SPEECH_MODEL = 'openai/gpt-4o-mini-tts';
/**
 * OpenAI's limit on the text (CreateSpeechRequest.input maxLength in its OpenAPI document): a
 * longer text is refused by the schema, before it is quoted and reserved, not by OpenAI after.
 */
export const OPENAI_SPEECH_MAX_CHARS = 4_096;

export const AUDIO_SPEECH_LIMITS = {
  maxTextChars: 5_000,
  minRate: 80,
  maxRate: 450,
  /**
   * Speech longer than this fails with artifact_too_large (nothing charged). Needed because
   * 5,000 characters do not bound the duration: espeak-ng spells out emoji and reads CJK
   * ideographs in an English voice one by one (5,000 of them take ~47 min at 80 wpm).
   * 1,100 s of espeak-ng's 22,050 Hz mono 16-bit PCM is ~48.5 MB, under the 50 MiB cap.
   */
  maxDurationSeconds: 1_100,
  maxArtifactBytes: 50 * 1024 * 1024,
} as const;

/** audio.speech's arguments as its schema admits them, defaults applied. */
export interface AudioSpeechArgs {
  model: string;
  text: string;
  voice?: string;
  rate: number;
  pitch: number;
  format: 'wav' | 'mp3';
}

/** Billing units: started blocks of 1,000 characters (Unicode code points, as the schema counts). */
export function speechUnits(text: string): number {
  return Math.max(1, ceilDiv(Array.from(text).length, 1_000));
}

/**
 * audio.speech: text to WAV or MP3 with espeak-ng (offline) or OpenAI's speech model (when
 * OPENAI_API_KEY is set). The text reaches espeak-ng only through a file, never argv; the
 * charge is from the text's character count, known before the run, so quote and charge agree.
 * Voices differ per model; the schema checks the voice against the chosen model's set.
 */
export function audioSpeech(p: ProviderAvailability) {
  return defineTool<AudioSpeechArgs>()({
    name: 'audio.speech',
    category: 'audio',
    description: 'Text to speech as WAV (16-bit PCM) or MP3 with espeak-ng.',
    unit: '1k_characters',
    steps: ['synthesize'],
    inputSchema: {
      type: 'object',
      additionalProperties: false,
      required: ['text'],
      properties: {
        model: { type: 'string', enum: ['espeak-ng', OPENAI_SPEECH_MODEL], description: 'Speech synthesizer; the first available one when omitted.' },
        text: {
          type: 'string',
          minLength: 1,
          maxLength: AUDIO_SPEECH_LIMITS.maxTextChars,
          pattern: '\\S',
          description:
            `Text to speak, 1 to ${AUDIO_SPEECH_LIMITS.maxTextChars} characters (Unicode code points; ${OPENAI_SPEECH_MAX_CHARS} for ${OPENAI_SPEECH_MODEL}) with at least one non-space character, read as plain text (no SSML). ` +
            `Speech longer than ${AUDIO_SPEECH_LIMITS.maxDurationSeconds} seconds fails with artifact_too_large and is not charged.`,
        },
        voice: {
          type: 'string',
          enum: [...SPEECH_VOICES, ...OPENAI_SPEECH_VOICES],
          description: `Voice. espeak-ng: a language and accent (default en-us). ${OPENAI_SPEECH_MODEL}: one of ${OPENAI_SPEECH_VOICES.join(', ')} (default alloy).`,
        },
        rate: {
          type: 'integer',
          minimum: AUDIO_SPEECH_LIMITS.minRate,
          maximum: AUDIO_SPEECH_LIMITS.maxRate,
          default: 160,
          description: `Speaking rate in words per minute, ${AUDIO_SPEECH_LIMITS.minRate} to ${AUDIO_SPEECH_LIMITS.maxRate} (espeak-ng only).`,
        },
        pitch: { type: 'integer', minimum: 0, maximum: 99, default: 50, description: 'Pitch, 0 (low) to 99 (high) (espeak-ng only).' },
        format: { type: 'string', enum: ['wav', 'mp3'], default: 'wav', description: 'wav: 16-bit PCM. mp3.' },
      },
      // the voice must belong to the chosen model (no model given: espeak-ng's voices)
      if: { required: ['model'], properties: { model: { const: OPENAI_SPEECH_MODEL } } },
      then: { properties: { voice: { enum: [...OPENAI_SPEECH_VOICES] }, text: { type: 'string', maxLength: OPENAI_SPEECH_MAX_CHARS } } },
      else: { properties: { voice: { enum: [...SPEECH_VOICES] } } },
    },
    example: { text: 'Hello from the Tool Execution Service.', voice: 'en-us', format: 'mp3' },
    models: [
      {
        id: 'espeak-ng',
        description: 'espeak-ng formant synthesis (offline), WAV or MP3 via ffmpeg.',
        example: { text: 'The quick brown fox jumps over the lazy dog.', voice: 'en-gb', rate: 180, pitch: 40, format: 'wav' },
        available: true,
        // ffprobe measures the output's duration and stream facts.
        requires: ['espeak-ng', 'ffmpeg', 'ffprobe'],
      },
      {
        id: OPENAI_SPEECH_MODEL,
        // no retirement announced by OpenAI's model object; an operator sets one with MODEL_RETIREMENTS
        provider: { name: 'openai', model: 'gpt-4o-mini-tts' },
        description: 'OpenAI gpt-4o-mini-tts through the audio/speech API. Needs OPENAI_API_KEY (and ffprobe on the worker to check the audio).',
        example: { model: OPENAI_SPEECH_MODEL, text: 'Welcome back. Your report is ready.', voice: 'coral', format: 'mp3' },
        available: p.openai,
        external: true,
        requires: ['ffprobe'],
      },
    ],
    describePrice: (p) => `${formatUsd(p.unitPriceMicros)} per 1,000 characters, minimum ${formatUsd(p.minimumMicros)}`,
    estimateUnits: (args) => ({ units: speechUnits(args.text) }),
    // the OpenAI call may cost money once sent: external, so a crash mid-call means needs_review
    plan: (args) => [{ name: 'synthesize', billed: true, timeoutMs: 180_000, external: args.model === OPENAI_SPEECH_MODEL }],
  });
}
