import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { bearer, waitForExecution, type TestStack } from './stack';

const exec = promisify(execFile);

/** Runs ffmpeg in a temporary folder and returns the bytes of `out` (e.g. "a.wav"). */
export async function ffmpegMake(args: string[], out: string): Promise<Buffer> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'tes-media-'));
  try {
    await exec('ffmpeg', ['-hide_banner', '-loglevel', 'error', '-y', ...args, path.join(dir, out)]);
    return await readFile(path.join(dir, out));
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** Sample inputs generated with ffmpeg's lavfi sources. */
export const makeMedia = {
  wav: (seconds = 2) => ffmpegMake(['-f', 'lavfi', '-i', `sine=frequency=440:duration=${seconds}`, '-ac', '1', '-ar', '22050'], 'a.wav'),
  mp3: (seconds = 2) => ffmpegMake(['-f', 'lavfi', '-i', `sine=frequency=330:duration=${seconds}`, '-c:a', 'libmp3lame', '-b:a', '64k'], 'a.mp3'),
  mp4: (seconds = 2, size = '320x240') =>
    ffmpegMake(
      [
        '-f',
        'lavfi',
        '-i',
        `testsrc=size=${size}:rate=25:duration=${seconds}`,
        '-f',
        'lavfi',
        '-i',
        `sine=frequency=220:duration=${seconds}`,
        '-c:v',
        'libx264',
        '-pix_fmt',
        'yuv420p',
        '-c:a',
        'aac',
        '-shortest',
      ],
      'v.mp4',
    ),
  png: (size = '320x200') => ffmpegMake(['-f', 'lavfi', '-i', `testsrc=size=${size}:duration=1`, '-frames:v', '1'], 'i.png'),
  jpeg: (size = '320x200') => ffmpegMake(['-f', 'lavfi', '-i', `testsrc=size=${size}:duration=1`, '-frames:v', '1', '-q:v', '3'], 'i.jpg'),
};

export interface Probe {
  format: { format_name: string; duration?: string };
  streams: { codec_type: string; codec_name: string; width?: number; height?: number; sample_rate?: string; channels?: number; duration?: string }[];
}

/** ffprobe facts of some bytes, for asserting on artifacts. */
export async function probeBytes(bytes: Buffer, ext: string): Promise<Probe> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'tes-probe-'));
  try {
    const file = path.join(dir, `x.${ext}`);
    await writeFile(file, bytes);
    const { stdout } = await exec('ffprobe', ['-v', 'error', '-print_format', 'json', '-show_format', '-show_streams', file]);
    return JSON.parse(stdout) as Probe;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

export async function upload(stack: TestStack, secret: string, mimeType: string, bytes: Buffer): Promise<string> {
  const res = await stack
    .http()
    .post('/tools/upload')
    .set(bearer(secret))
    .send({ mimeType, data: bytes.toString('base64') });
  if (res.status !== 200) throw new Error(`upload failed: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.data.id;
}

/**
 * An upload the gateway must refuse because it cannot measure the bytes (magic number right,
 * content not): 400 file_content_mismatch, and nothing stored for the project.
 */
export async function expectUploadRefused(stack: TestStack, secret: string, projectId: string, mimeType: string, bytes: Buffer): Promise<void> {
  const before = await stack.db('files').where({ project_id: projectId }).count<{ n: string }[]>({ n: '*' });
  const res = await stack
    .http()
    .post('/tools/upload')
    .set(bearer(secret))
    .send({ mimeType, data: bytes.toString('base64') });
  expect([res.status, res.body.error?.message]).toEqual([400, 'file_content_mismatch']);
  const after = await stack.db('files').where({ project_id: projectId }).count<{ n: string }[]>({ n: '*' });
  expect(after[0]!.n).toBe(before[0]!.n);
}

/** Quote, submit and wait; returns the final execution. */
export async function runTool(
  stack: TestStack,
  secret: string,
  tool: string,
  args: Record<string, unknown>,
  key = `run-${Math.random().toString(36).slice(2, 12)}`,
): Promise<Record<string, unknown>> {
  const q = await stack.http().post('/tools/quote').set(bearer(secret)).send({ tool, arguments: args });
  if (q.status !== 200) throw new Error(`quote failed: ${q.status} ${JSON.stringify(q.body)}`);
  const sub = await stack
    .http()
    .post(`/tools/${tool}`)
    .set({ ...bearer(secret), 'Idempotency-Key': key })
    .send({ tool, arguments: args, priceVersion: q.body.data.priceVersion, maximumChargeMicros: q.body.data.maximumChargeMicros });
  if (sub.status !== 202) throw new Error(`submit failed: ${sub.status} ${JSON.stringify(sub.body)}`);
  return waitForExecution(stack, secret, sub.body.data.id, undefined, 60_000);
}

/** Downloads an artifact's bytes through its presigned URL (no API key). */
export async function downloadArtifact(stack: TestStack, secret: string, executionId: string, artifactId: string): Promise<Buffer> {
  const dl = await stack.http().get(`/tools/executions/${executionId}/artifacts/${artifactId}/download`).set(bearer(secret));
  if (dl.status !== 200) throw new Error(`download failed: ${dl.status}`);
  const res = await fetch(dl.body.data.url);
  if (res.status !== 200) throw new Error(`fetch failed: ${res.status}`);
  return Buffer.from(await res.arrayBuffer());
}
