import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { Catalog, DEFAULT_PRICE_LIST } from '@tes/catalog';
import { bearer, projectBalance, useStack } from '../stack';
import { downloadArtifact, expectUploadRefused, ffmpegMake, makeMedia, probeBytes, runTool, upload } from '../media';

/**
 * audio.speech and audio.transcode through the real stack (gateway, RabbitMQ, worker with
 * espeak-ng/ffmpeg, Postgres ledger, S3); every artifact is downloaded and decoded.
 */
const stack = useStack();
const catalog = new Catalog({ enableTestTools: true });
const SPEECH = DEFAULT_PRICE_LIST.tools['audio.speech']!.models['espeak-ng']!;
const TRANSCODE = DEFAULT_PRICE_LIST.tools['audio.transcode']!.models.ffmpeg!;
const CREDIT = 1_000_000;
const exec = promisify(execFile);

interface Exe {
  id: string;
  status: string;
  reservedMicros: number;
  chargedMicros: number;
  errorCode: string | null;
  errorMessage: string | null;
  steps: { name: string; status: string; costMicros: number }[];
  output: {
    artifacts: { id: string; format: string; mimeType: string }[];
    durationSeconds: number;
    sampleRate: number;
    channels: number;
    codec?: string;
  } | null;
}

async function run(secret: string, tool: string, args: Record<string, unknown>): Promise<Exe> {
  return (await runTool(stack, secret, tool, args)) as unknown as Exe;
}

/** The single artifact of a succeeded execution, downloaded and probed. */
async function artifactOf(secret: string, exe: Exe) {
  expect(exe.errorMessage).toBeNull();
  expect(exe.status).toBe('succeeded');
  const art = exe.output!.artifacts[0]!;
  expect(exe.output!.artifacts).toHaveLength(1);
  const bytes = await downloadArtifact(stack, secret, exe.id, art.id);
  const probe = await probeBytes(bytes, art.format);
  const audio = probe.streams.find((s) => s.codec_type === 'audio')!;
  expect(audio).toBeDefined();
  return { art, probe, audio, duration: Number(probe.format.duration) };
}

/** The money left the project exactly as charged; nothing stays reserved. */
async function settledAt(projectId: string, exe: Exe): Promise<void> {
  expect(exe.chargedMicros).toBeLessThanOrEqual(exe.reservedMicros);
  expect(exe.chargedMicros).toBe(exe.steps.reduce((s, x) => s + x.costMicros, 0));
  expect(await projectBalance(stack.db, projectId)).toEqual({ available: CREDIT - exe.chargedMicros, reserved: 0 });
}

/** audio.transcode's charge: started seconds of the measured output at the unit price, capped by the reservation. */
function transcodeCharge(exe: Exe): number {
  return Math.min(exe.reservedMicros, Math.max(TRANSCODE.minimumMicros, Math.ceil(exe.output!.durationSeconds) * TRANSCODE.unitPriceMicros));
}

async function integratedLufs(bytes: Buffer, ext: string): Promise<number> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'tes-lufs-'));
  try {
    const file = path.join(dir, `x.${ext}`);
    await writeFile(file, bytes);
    const { stderr } = await exec('ffmpeg', ['-nostdin', '-hide_banner', '-i', file, '-af', 'ebur128', '-f', 'null', '-']);
    const m = /Integrated loudness:\s*\n\s*I:\s*(-?[\d.]+) LUFS/.exec(stderr);
    if (!m) throw new Error(`no loudness in ffmpeg output: ${stderr.slice(-500)}`);
    return Number(m[1]);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

describe('audio.speech', () => {
  it('runs its catalog example and returns a decodable MP3, charged per started 1,000 characters', async () => {
    const p = await stack.seed({ creditMicros: CREDIT });
    const example = catalog.get('audio.speech')!.example;
    expect(example.format).toBe('mp3');
    const exe = await run(p.secret, 'audio.speech', example);
    const { art, audio, duration } = await artifactOf(p.secret, exe);
    expect(art.mimeType).toBe('audio/mpeg');
    expect(audio.codec_name).toBe('mp3');
    expect(Number(audio.sample_rate)).toBe(22050);
    expect(duration).toBeGreaterThan(0.5);
    expect(exe.output!.durationSeconds).toBeGreaterThan(0.5);
    expect(Math.abs(exe.output!.durationSeconds - duration)).toBeLessThan(0.2);
    expect(exe.output!).toMatchObject({ sampleRate: 22050, channels: 1 });
    expect(exe.reservedMicros).toBe(Math.max(SPEECH.minimumMicros, SPEECH.unitPriceMicros));
    expect(exe.chargedMicros).toBe(exe.reservedMicros);
    await settledAt(p.projectId, exe);
  });

  it('writes 16-bit PCM WAV whose reported facts match the decoded file', async () => {
    const p = await stack.seed({ creditMicros: CREDIT });
    const exe = await run(p.secret, 'audio.speech', { text: 'Testing one, two, three.', voice: 'en-gb', rate: 200, pitch: 70 });
    const { art, audio, duration } = await artifactOf(p.secret, exe);
    expect(art).toMatchObject({ format: 'wav', mimeType: 'audio/wav' });
    expect(audio.codec_name).toBe('pcm_s16le');
    expect(Number(audio.sample_rate)).toBe(22050);
    expect(audio.channels).toBe(1);
    expect(duration).toBeGreaterThan(0.5);
    expect(exe.output!.durationSeconds).toBeCloseTo(duration, 2);
    await settledAt(p.projectId, exe);
  });

  it('speaks text that starts with "-" instead of reading it as an option', async () => {
    const p = await stack.seed({ creditMicros: CREDIT });
    // As argv, "--version" would print the version and no WAV, and the step would fail.
    const exe = await run(p.secret, 'audio.speech', { text: '--version -w /tmp/x.wav -h' });
    const { audio, duration } = await artifactOf(p.secret, exe);
    expect(audio.codec_name).toBe('pcm_s16le');
    expect(duration).toBeGreaterThan(1);
  });

  it('charges from the character count: 1,001 characters are 2 units', async () => {
    const p = await stack.seed({ creditMicros: CREDIT });
    const text = `${'hello '.repeat(166)}hello`; // 1,001 characters
    expect(text).toHaveLength(1001);
    const q = await stack
      .http()
      .post('/tools/quote')
      .set(bearer(p.secret))
      .send({ tool: 'audio.speech', arguments: { text, rate: 450 } });
    expect(q.body.data).toMatchObject({ estimatedUnits: 2, maximumChargeMicros: 2 * SPEECH.unitPriceMicros, unit: '1k_characters' });
    const exe = await run(p.secret, 'audio.speech', { text, rate: 450, format: 'mp3' });
    await artifactOf(p.secret, exe);
    expect(exe.chargedMicros).toBe(2 * SPEECH.unitPriceMicros);
    await settledAt(p.projectId, exe);
  });

  it('stops speech past 1,100 s with artifact_too_large and charges nothing', async () => {
    const p = await stack.seed({ creditMicros: CREDIT });
    // an English voice reads each ideograph on its own: ~47 min of speech from 5,000 characters
    const exe = await run(p.secret, 'audio.speech', { text: '\u9f8d'.repeat(5000), rate: 80 });
    expect(exe).toMatchObject({ status: 'failed', errorCode: 'artifact_too_large', chargedMicros: 0, reservedMicros: 5 * SPEECH.unitPriceMicros });
    await settledAt(p.projectId, exe);
  });
});

describe('audio.transcode', () => {
  it('runs its catalog example (an uploaded 3 s MP3, normalised) and charges the measured seconds', async () => {
    const p = await stack.seed({ creditMicros: CREDIT });
    const fileId = await upload(stack, p.secret, 'audio/mpeg', await makeMedia.mp3(3));
    const example: Record<string, unknown> = { ...catalog.get('audio.transcode')!.example, fileId };
    const exe = await run(p.secret, 'audio.transcode', example);
    const { audio, duration } = await artifactOf(p.secret, exe);
    expect(audio.codec_name).toBe('mp3');
    expect(duration).toBeGreaterThan(2.9);
    expect(exe.output!.durationSeconds).toBeCloseTo(3, 1);
    expect(exe.output!.codec).toBe('mp3');
    expect(exe.steps.map((s) => [s.name, s.status, s.costMicros])).toEqual([
      ['probe', 'succeeded', 0],
      ['transcode', 'succeeded', exe.chargedMicros],
    ]);
    // quoted from the upload's decoded 3 s, not the example's 10 s
    expect(exe.reservedMicros).toBe(3 * TRANSCODE.unitPriceMicros);
    expect(exe.chargedMicros).toBe(transcodeCharge(exe));
    expect(exe.chargedMicros).toBe(3 * TRANSCODE.unitPriceMicros);
    await settledAt(p.projectId, exe);
  });

  const trims: [string, string, () => Promise<Buffer>, Record<string, unknown>, string, number, number][] = [
    ['WAV', 'audio/wav', () => makeMedia.wav(3), { format: 'mp3', sampleRate: 44100, channels: 2 }, 'mp3', 44100, 2],
    ['MP3', 'audio/mpeg', () => makeMedia.mp3(3), { format: 'wav', sampleRate: 16000, channels: 1 }, 'pcm_s16le', 16000, 1],
    ['MP4', 'video/mp4', () => makeMedia.mp4(3), { format: 'wav' }, 'pcm_s16le', 44100, 1],
  ];

  it.each(trims)('trims 1 s out of a 3 s %s input', async (_name, mime, make, extra, codec, rate, channels) => {
    const p = await stack.seed({ creditMicros: CREDIT });
    const fileId = await upload(stack, p.secret, mime, await make());
    const exe = await run(p.secret, 'audio.transcode', { fileId, startSeconds: 0.5, durationSeconds: 1, ...extra });
    const { audio, duration } = await artifactOf(p.secret, exe);
    expect(audio.codec_name).toBe(codec);
    expect(Number(audio.sample_rate)).toBe(rate);
    expect(audio.channels).toBe(channels);
    expect(Math.abs(duration - 1)).toBeLessThanOrEqual(0.1);
    expect(Math.abs(exe.output!.durationSeconds - 1)).toBeLessThanOrEqual(0.1);
    expect(exe.output).toMatchObject({ sampleRate: rate, channels, codec });
    expect(exe.reservedMicros).toBe(TRANSCODE.unitPriceMicros);
    expect(exe.chargedMicros).toBe(transcodeCharge(exe));
    await settledAt(p.projectId, exe);
  });

  it('normalises loudness to about -16 LUFS and keeps the input sample rate', async () => {
    const p = await stack.seed({ creditMicros: CREDIT });
    const quiet = await ffmpegMake(['-f', 'lavfi', '-i', 'sine=frequency=440:duration=3', '-af', 'volume=0.05', '-ac', '1', '-ar', '22050'], 'q.wav');
    expect(await integratedLufs(quiet, 'wav')).toBeLessThan(-40);
    const fileId = await upload(stack, p.secret, 'audio/wav', quiet);
    const exe = await run(p.secret, 'audio.transcode', { fileId, format: 'wav', normalize: true });
    const { art, audio } = await artifactOf(p.secret, exe);
    // loudnorm alone would output 192 kHz
    expect(Number(audio.sample_rate)).toBe(22050);
    const bytes = await downloadArtifact(stack, p.secret, exe.id, art.id);
    expect(Math.abs((await integratedLufs(bytes, 'wav')) + 16)).toBeLessThan(1.5);
    // no durationSeconds: the upload's measured 3 s reserved (not the 600 s cap), 3 s charged
    expect(exe.reservedMicros).toBe(3 * TRANSCODE.unitPriceMicros);
    expect(exe.chargedMicros).toBe(3 * TRANSCODE.unitPriceMicros);
    expect(exe.chargedMicros).toBe(transcodeCharge(exe));
    await settledAt(p.projectId, exe);
  });

  it('refuses, in the free probe step, a WAV output over the 50 MiB cap', async () => {
    const p = await stack.seed({ creditMicros: CREDIT });
    const long = await ffmpegMake(
      ['-f', 'lavfi', '-i', 'sine=frequency=440:duration=600', '-ac', '2', '-ar', '48000', '-c:a', 'libmp3lame', '-b:a', '32k'],
      'l.mp3',
    );
    const fileId = await upload(stack, p.secret, 'audio/mpeg', long);
    // 600 s x 48 kHz x 2 channels x 2 bytes = 115 MB
    const exe = await run(p.secret, 'audio.transcode', { fileId, format: 'wav' });
    expect(exe).toMatchObject({ status: 'failed', errorCode: 'artifact_too_large', chargedMicros: 0 });
    expect(exe.steps.map((s) => [s.name, s.status])).toEqual([['probe', 'failed']]);
    await settledAt(p.projectId, exe);
  }, 180_000); // making, uploading (the gateway decodes it to measure it) and probing 10 minutes of audio on a busy machine

  it('fails an MP4 without an audio stream with invalid_input_file, charging nothing', async () => {
    const p = await stack.seed({ creditMicros: CREDIT });
    const silentVideo = await ffmpegMake(
      ['-f', 'lavfi', '-i', 'testsrc=size=160x120:rate=25:duration=2', '-c:v', 'libx264', '-pix_fmt', 'yuv420p', '-an'],
      'v.mp4',
    );
    expect((await probeBytes(silentVideo, 'mp4')).streams.map((s) => s.codec_type)).toEqual(['video']);
    const fileId = await upload(stack, p.secret, 'video/mp4', silentVideo);
    const exe = await run(p.secret, 'audio.transcode', { fileId, format: 'mp3', durationSeconds: 5 });
    expect(exe).toMatchObject({ status: 'failed', errorCode: 'invalid_input_file', chargedMicros: 0, reservedMicros: 5 * TRANSCODE.unitPriceMicros });
    expect(exe.steps.map((s) => [s.name, s.status])).toEqual([['probe', 'failed']]);
    await settledAt(p.projectId, exe);
  });

  it('refuses at upload a file that is not decodable audio (a WAV header over noise): file_content_mismatch, nothing stored', async () => {
    const p = await stack.seed({ creditMicros: CREDIT });
    const junk = Buffer.concat([Buffer.from('RIFF\x00\x10\x00\x00WAVE', 'latin1'), randomBytes(4096)]);
    await expectUploadRefused(stack, p.secret, p.projectId, 'audio/wav', junk);
  });

  it('refuses a startSeconds past the end of the input before any paid work', async () => {
    const p = await stack.seed({ creditMicros: CREDIT });
    const fileId = await upload(stack, p.secret, 'audio/wav', await makeMedia.wav(2));
    const exe = await run(p.secret, 'audio.transcode', { fileId, format: 'wav', startSeconds: 5, durationSeconds: 1 });
    expect(exe).toMatchObject({ status: 'failed', errorCode: 'invalid_input_file', chargedMicros: 0 });
    expect(exe.errorMessage).toMatch(/startSeconds 5 is at or past the end of the input audio \(2\.0\d\d s\)/);
    await settledAt(p.projectId, exe);
  });
});

describe('out-of-bound arguments are refused before anything is reserved', () => {
  const cases: [string, string, Record<string, unknown>][] = [
    ['speech text of 5,001 characters', 'audio.speech', { text: 'a'.repeat(5001) }],
    ['speech rate 1000', 'audio.speech', { text: 'hi', rate: 1000 }],
    ['speech pitch 100', 'audio.speech', { text: 'hi', pitch: 100 }],
    ['an unknown voice', 'audio.speech', { text: 'hi', voice: 'xx-bogus' }],
    ['a voice that is an option', 'audio.speech', { text: 'hi', voice: '--stdout' }],
    ['whitespace-only text', 'audio.speech', { text: ' \n\t ' }],
    ['transcode durationSeconds 601', 'audio.transcode', { fileId: 'file_01ARZ3NDEKTSV4RRFFQ69G5FAV', format: 'wav', durationSeconds: 601 }],
    ['transcode durationSeconds 0', 'audio.transcode', { fileId: 'file_01ARZ3NDEKTSV4RRFFQ69G5FAV', format: 'wav', durationSeconds: 0 }],
    ['transcode sampleRate 12345', 'audio.transcode', { fileId: 'file_01ARZ3NDEKTSV4RRFFQ69G5FAV', format: 'wav', sampleRate: 12345 }],
    ['transcode channels 3', 'audio.transcode', { fileId: 'file_01ARZ3NDEKTSV4RRFFQ69G5FAV', format: 'wav', channels: 3 }],
    ['transcode negative start', 'audio.transcode', { fileId: 'file_01ARZ3NDEKTSV4RRFFQ69G5FAV', format: 'wav', startSeconds: -1 }],
    ['transcode format flac', 'audio.transcode', { fileId: 'file_01ARZ3NDEKTSV4RRFFQ69G5FAV', format: 'flac' }],
  ];

  it.each(cases)('%s', async (_name, tool, args) => {
    const p = await stack.seed({ creditMicros: CREDIT });
    const version = (await stack.http().get('/tools').set(bearer(p.secret))).body.data.priceVersion as string;
    const q = await stack.http().post('/tools/quote').set(bearer(p.secret)).send({ tool, arguments: args });
    expect(q.status).toBe(400);
    expect(q.body.error).toMatchObject({ status: 'INVALID_ARGUMENT', message: 'invalid_arguments' });
    const res = await stack
      .http()
      .post(`/tools/${tool}`)
      .set({ ...bearer(p.secret), 'Idempotency-Key': `bad-${Math.random().toString(36).slice(2, 12)}` })
      .send({ tool, arguments: args, priceVersion: version, maximumChargeMicros: CREDIT });
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ status: 'INVALID_ARGUMENT', message: 'invalid_arguments' });
    expect(await projectBalance(stack.db, p.projectId)).toEqual({ available: CREDIT, reserved: 0 });
    const n = await stack.db('executions').count<{ n: string }[]>({ n: '*' }).where({ project_id: p.projectId });
    expect(Number(n[0]!.n)).toBe(0);
  });
});
