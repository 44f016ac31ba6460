import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { AUDIO_SPEECH_LIMITS, OPENAI_SPEECH_MODEL, speechUnits, type AudioSpeechArgs } from '@tes/catalog';
import { StepError } from '@tes/core';
import { ProgramFailed, runProgram } from '../programs';
import { openaiSpeech } from '../providers/openai';
import type { RunnerOf, StepContext, StepResult, StepWait } from '../runner';
import { assertArtifactSize, measureAudio } from './audio-transcode';
import { runModel, type HostedModel } from './generate';

/** The bounds the schema documents, from the tool definition itself. */
const L = AUDIO_SPEECH_LIMITS;
/** espeak-ng writes 22,050 Hz mono 16-bit PCM: the WAV header plus the longest speech allowed. */
const MAX_WAV_BYTES = 44 + L.maxDurationSeconds * 22_050 * 2;

function badWav(): StepError {
  return new StepError('internal_error', 'espeak-ng did not produce a WAV stream');
}

/**
 * espeak-ng --stdout cannot seek back, so its RIFF and data sizes are placeholders
 * (0x7ffff000-ish). Writes the real sizes so every player and ffprobe agree on the length.
 */
function finalizeStreamedWav(buf: Buffer): Buffer {
  if (buf.length < 12 || buf.toString('latin1', 0, 4) !== 'RIFF' || buf.toString('latin1', 8, 12) !== 'WAVE') throw badWav();
  let off = 12;
  while (off + 8 <= buf.length) {
    const id = buf.toString('latin1', off, off + 4);
    if (id === 'data') {
      buf.writeUInt32LE(buf.length - off - 8, off + 4);
      buf.writeUInt32LE(buf.length - 8, 4);
      return buf;
    }
    const size = buf.readUInt32LE(off + 4);
    off += 8 + size + (size % 2);
  }
  throw badWav();
}

/**
 * audio.speech with espeak-ng: one 'synthesize' step. Hazards handled here:
 * - the text goes through a file (-f), never argv, so text starting with '-' is spoken;
 *   without -m espeak-ng reads it as plain text, not SSML;
 * - the duration is NOT bounded by the 5,000-character limit (emoji and ideographs expand to
 *   long readings), so the WAV is streamed to stdout and the child is killed once it passes
 *   MAX_WAV_BYTES instead of letting it write an unbounded file with -w.
 */
export const audioSpeechRunner: RunnerOf<'audio.speech'> = {
  async synthesize(ctx, a) {
    if (a.model === OPENAI_SPEECH_MODEL) return openaiSynthesize(ctx, a);
    const textFile = path.join(ctx.workDir, `speech-${ctx.index}.txt`);
    await writeFile(textFile, a.text, 'utf8');
    let raw: Buffer;
    try {
      const argv = ['-b', '1', '-v', a.voice ?? 'en-us', '-s', String(a.rate), '-p', String(a.pitch), '-f', textFile, '--stdout'];
      raw = (await runProgram('espeak-ng', argv, { signal: ctx.signal, cwd: ctx.workDir, maxStdoutBytes: MAX_WAV_BYTES })).stdout;
    } catch (err) {
      if (err instanceof StepError && err.errorCode === 'artifact_too_large') {
        throw new StepError('artifact_too_large', `the speech would last more than ${L.maxDurationSeconds} seconds`);
      }
      if (err instanceof ProgramFailed) throw new StepError('internal_error', `espeak-ng failed: ${err.message.slice(0, 200)}`);
      throw err;
    }
    const wav = finalizeStreamedWav(raw);
    const wavFile = path.join(ctx.workDir, `speech-${ctx.index}.wav`);
    await writeFile(wavFile, wav);
    let outFile = wavFile;
    if (a.format === 'mp3') {
      outFile = path.join(ctx.workDir, `speech-${ctx.index}.mp3`);
      const argv = [
        '-nostdin',
        '-hide_banner',
        '-loglevel',
        'error',
        '-y',
        '-i',
        wavFile,
        '-map',
        '0:a:0',
        '-c:a',
        'libmp3lame',
        '-q:a',
        '2',
        '-fs',
        String(L.maxArtifactBytes + 1),
        '-f',
        'mp3',
        outFile,
      ];
      try {
        await runProgram('ffmpeg', argv, { signal: ctx.signal, cwd: ctx.workDir, maxStdoutBytes: 64_000 });
      } catch (err) {
        if (err instanceof ProgramFailed) throw new StepError('internal_error', `MP3 encoding failed: ${err.message.slice(0, 200)}`);
        throw err;
      }
    }
    await assertArtifactSize(outFile, L.maxArtifactBytes);
    const facts = await measureAudio(outFile, ctx.signal);
    return {
      // Billed on the characters actually spoken: the whole text, counted in code points as
      // the schema's maxLength counts them, so the charge equals the quote.
      units: speechUnits(a.text),
      files: [{ format: a.format, mimeType: a.format === 'mp3' ? 'audio/mpeg' : 'audio/wav', body: await readFile(outFile) }],
      facts: { durationSeconds: facts.durationSeconds, sampleRate: facts.sampleRate, channels: facts.channels, characters: Array.from(a.text).length },
    };
  },
};

/** The hosted speech model: one synchronous call (a refused one is waited out like a generate step's). */
const HOSTED: Record<string, HostedModel<AudioSpeechArgs>> = {
  [OPENAI_SPEECH_MODEL]: {
    kind: 'call',
    call: async (p, a) => ({
      outputs: [
        { bytes: await openaiSpeech(p, { model: 'gpt-4o-mini-tts', input: a.text, voice: a.voice ?? 'alloy', response_format: a.format }, L.maxArtifactBytes) },
      ],
    }),
  },
};

/**
 * The OpenAI model: one request, the audio comes back whole. It is decoded with ffprobe
 * before it is stored (a provider answer that is not audio fails with provider_error) and
 * charged on the characters sent, like espeak-ng.
 */
async function openaiSynthesize(ctx: StepContext, a: AudioSpeechArgs): Promise<StepResult | StepWait> {
  const ran = await runModel(ctx, HOSTED, a, { max: 1, maxBytes: L.maxArtifactBytes });
  if ('wait' in ran) return ran.wait;
  const body = ran.files[0]?.body;
  if (!body) throw new StepError('provider_error', 'the provider returned no audio');
  const file = path.join(ctx.workDir, `speech-${ctx.index}.${a.format}`);
  await writeFile(file, body);
  let facts;
  try {
    facts = await measureAudio(file, ctx.signal);
  } catch (err) {
    if (err instanceof StepError) throw new StepError('provider_error', 'the provider returned something that is not audio');
    throw err;
  }
  const characters = Array.from(a.text).length;
  return {
    units: speechUnits(a.text),
    files: [{ format: a.format, mimeType: a.format === 'mp3' ? 'audio/mpeg' : 'audio/wav', body }],
    facts: { durationSeconds: facts.durationSeconds, sampleRate: facts.sampleRate, channels: facts.channels, characters },
  };
}
