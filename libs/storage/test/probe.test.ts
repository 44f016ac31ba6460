import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import sharp from 'sharp';
import { probeUpload } from '@tes/storage';

/** probeUpload on real files made with ffmpeg and sharp (the gateway measures every upload with it). */
const exec = promisify(execFile);
const OPTIONS = { timeoutMs: 30_000 };

async function ffmpeg(args: string[], out: string): Promise<Buffer> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'tes-probe-test-'));
  try {
    await exec('ffmpeg', ['-hide_banner', '-loglevel', 'error', '-y', ...args, path.join(dir, out)]);
    return await readFile(path.join(dir, out));
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

describe('probeUpload', () => {
  it('images: the upright size from the header (EXIF orientation 6 turns 300x200 into 200x300)', async () => {
    const png = await sharp({ create: { width: 300, height: 200, channels: 3, background: '#08c' } })
      .png()
      .toBuffer();
    expect(await probeUpload(png, 'png', OPTIONS)).toEqual({ kind: 'facts', facts: { kind: 'image', width: 300, height: 200 } });
    const turned = await sharp({ create: { width: 300, height: 200, channels: 3, background: '#08c' } })
      .jpeg()
      .withMetadata({ orientation: 6 })
      .toBuffer();
    expect(await probeUpload(turned, 'jpeg', OPTIONS)).toEqual({ kind: 'facts', facts: { kind: 'image', width: 200, height: 300 } });
  });

  it('audio: the decoded length, not the container duration (an MP3 of 3 s declares ~3.03 s)', async () => {
    const mp3 = await ffmpeg(['-f', 'lavfi', '-i', 'sine=frequency=330:duration=3', '-c:a', 'libmp3lame', '-b:a', '64k'], 'a.mp3');
    const probe = await probeUpload(mp3, 'mp3', OPTIONS);
    expect(probe).toMatchObject({
      kind: 'facts',
      facts: { kind: 'media', video: null, audio: { codec: 'mp3', sampleRate: 44100, channels: 1, decodedSeconds: 3 } },
    });
    expect(probe.kind === 'facts' && probe.facts.kind === 'media' && probe.facts.durationSeconds).toBeGreaterThan(3);
  });

  it('video: frame size, rate and duration of the video stream, and its audio', async () => {
    const mp4 = await ffmpeg(
      [
        ...['-f', 'lavfi', '-i', 'testsrc=size=160x120:rate=30000/1001:duration=2'],
        ...['-f', 'lavfi', '-i', 'sine=frequency=220:duration=2', '-c:v', 'libx264', '-pix_fmt', 'yuv420p', '-c:a', 'aac', '-shortest'],
      ],
      'v.mp4',
    );
    const probe = await probeUpload(mp4, 'mp4', OPTIONS);
    expect(probe).toMatchObject({ kind: 'facts', facts: { kind: 'media', video: { codec: 'h264', width: 160, height: 120 }, audio: { codec: 'aac' } } });
    if (probe.kind !== 'facts' || probe.facts.kind !== 'media') throw new Error('no media facts');
    expect(probe.facts.video!.frameRate).toBeCloseTo(29.97, 2);
    expect(probe.facts.video!.durationSeconds).toBeCloseTo(2, 1);
  });

  it('refuses what cannot be measured: magic bytes alone, a WAV without audio, garbage after an MP4 header', async () => {
    const magicPng = Buffer.from('89504e470d0a1a0a0000000d49484452', 'hex');
    expect(await probeUpload(magicPng, 'png', OPTIONS)).toMatchObject({ kind: 'unreadable' });
    const magicWav = Buffer.concat([Buffer.from('RIFF'), Buffer.alloc(4), Buffer.from('WAVEfmt ')]);
    expect(await probeUpload(magicWav, 'wav', OPTIONS)).toMatchObject({ kind: 'unreadable' });
    const mp4 = Buffer.concat([Buffer.alloc(4), Buffer.from('ftypisom'), Buffer.alloc(64, 7)]);
    expect(await probeUpload(mp4, 'mp4', OPTIONS)).toMatchObject({ kind: 'unreadable' });
  });

  it('without ffprobe, audio and video are unmeasured (kept without facts), images are still measured', async () => {
    const wav = await ffmpeg(['-f', 'lavfi', '-i', 'sine=frequency=440:duration=1'], 'a.wav');
    expect(await probeUpload(wav, 'wav', { ...OPTIONS, ffprobe: '/nonexistent/ffprobe' })).toEqual({
      kind: 'unmeasured',
      reason: '/nonexistent/ffprobe is not installed',
    });
    const png = await sharp({ create: { width: 2, height: 2, channels: 3, background: '#000' } })
      .png()
      .toBuffer();
    expect(await probeUpload(png, 'png', { ...OPTIONS, ffprobe: '/nonexistent/ffprobe' })).toMatchObject({ kind: 'facts' });
  });
});
