import { randomBytes } from 'node:crypto';
import { Catalog, DEFAULT_PRICE_LIST } from '@tes/catalog';
import { addKey } from '@tes/testing';
import { makeMedia, probeBytes, upload, downloadArtifact, expectUploadRefused, type Probe } from '../media';
import { bearer, projectBalance, startStack, type TestStack } from '../stack';

/**
 * video.slideshow and video.transcode through the real stack (gateway, queue, worker,
 * ffmpeg, S3): every artifact is decoded with ffprobe, every charge checked against the
 * duration actually produced and the reservation.
 */
let stack: TestStack;
let p: { projectId: string; secret: string };
const ids = { png: '', jpeg: '', wav: '', mp3: '', mp4: '' };
const CREDIT = 100_000_000;
const price = (tool: string) => DEFAULT_PRICE_LIST.tools[tool]!.models.ffmpeg!.unitPriceMicros;

beforeAll(async () => {
  stack = await startStack();
  p = await stack.seed({ creditMicros: CREDIT });
  const [png, jpeg, wav, mp3, mp4] = await Promise.all([
    makeMedia.png('320x200'),
    makeMedia.jpeg('240x320'),
    makeMedia.wav(2),
    makeMedia.mp3(2),
    makeMedia.mp4(3, '320x240'),
  ]);
  ids.png = await upload(stack, p.secret, 'image/png', png);
  ids.jpeg = await upload(stack, p.secret, 'image/jpeg', jpeg);
  ids.wav = await upload(stack, p.secret, 'audio/wav', wav);
  ids.mp3 = await upload(stack, p.secret, 'audio/mpeg', mp3);
  ids.mp4 = await upload(stack, p.secret, 'video/mp4', mp4);
});

// The gateway limits each key to 120 requests a minute and polling spends them: every test
// gets a fresh key of the same project (same uploads, same balance).
let secret = '';
beforeEach(async () => {
  secret = (await addKey(stack.db, p.projectId)).secret;
});

afterAll(async () => {
  if (!stack) return;
  const audit = await stack.audit();
  await stack.stop();
  expect(audit.problems).toEqual([]);
  expect(audit.ok).toBe(true);
});

interface Quote {
  priceVersion: string;
  maximumChargeMicros: number;
  estimatedUnits: number;
}

type Execution = Record<string, unknown> & {
  status: string;
  reservedMicros: number;
  chargedMicros: number;
  errorCode: string | null;
  errorMessage: string | null;
  steps: { name: string; costMicros: number; status: string }[];
  output: { artifacts: { id: string; mimeType: string }[]; durationSeconds: number; width: number; height: number } | null;
};

/** Quote, submit with the quoted maximum, wait for the end; the project's balance is settled. */
async function run(secret: string, tool: string, args: Record<string, unknown>): Promise<{ quote: Quote; done: Execution }> {
  const q = await stack.http().post('/tools/quote').set(bearer(secret)).send({ tool, arguments: args });
  expect(q.status).toBe(200);
  const quote = q.body.data as Quote;
  const sub = await stack
    .http()
    .post(`/tools/${tool}`)
    .set({ ...bearer(secret), 'Idempotency-Key': `v-${randomBytes(6).toString('hex')}` })
    .send({ tool, arguments: args, priceVersion: quote.priceVersion, maximumChargeMicros: quote.maximumChargeMicros });
  expect(sub.status).toBe(202);
  expect(sub.body.data.reservedMicros).toBe(quote.maximumChargeMicros);
  const id = sub.body.data.id as string;
  // polled more slowly than waitForExecution does, to stay well inside the key's rate limit
  for (const until = Date.now() + 60_000; Date.now() < until; await new Promise((r) => setTimeout(r, 250))) {
    const res = await stack.http().get(`/tools/executions/${id}`).set(bearer(secret));
    expect(res.status).toBe(200);
    if (['succeeded', 'failed', 'cancelled', 'needs_review'].includes(res.body.data.status)) return { quote, done: res.body.data as Execution };
  }
  throw new Error(`execution ${id} did not finish within 60 s`);
}

/** The one MP4 artifact, decoded. */
async function artifact(secret: string, done: Execution): Promise<{ probe: Probe; video: Probe['streams'][number]; audio: Probe['streams'] }> {
  expect(done.status).toBe('succeeded');
  const arts = done.output!.artifacts;
  expect(arts).toHaveLength(1);
  expect(arts[0]!.mimeType).toBe('video/mp4');
  const bytes = await downloadArtifact(stack, secret, done.id as string, arts[0]!.id);
  const probe = await probeBytes(bytes, 'mp4');
  const videos = probe.streams.filter((s) => s.codec_type === 'video');
  expect(videos).toHaveLength(1);
  expect(probe.format.format_name).toContain('mp4');
  return { probe, video: videos[0]!, audio: probe.streams.filter((s) => s.codec_type === 'audio') };
}

/** The charge is ceil(actual seconds) x price, from the decoded artifact, within the reservation. */
function expectCharge(tool: string, done: Execution, quote: Quote, video: Probe['streams'][number]): void {
  const actual = Number(video.duration);
  expect(done.chargedMicros).toBe(Math.ceil(Math.round(actual * 1000) / 1000) * price(tool));
  expect(done.chargedMicros).toBeLessThanOrEqual(done.reservedMicros);
  expect(done.reservedMicros).toBe(quote.maximumChargeMicros);
  expect(done.steps.map((s) => [s.name, s.status])).toEqual([
    ['probe', 'succeeded'],
    [tool === 'video.slideshow' ? 'render' : 'transcode', 'succeeded'],
  ]);
  expect(done.steps[0]!.costMicros).toBe(0);
}

async function catalogExample(tool: string): Promise<Record<string, unknown>> {
  const res = await stack.http().get('/tools').set(bearer(secret));
  const def = (res.body.data.tools as { name: string; available: boolean; example: Record<string, unknown> }[]).find((t) => t.name === tool);
  expect(def?.available).toBe(true);
  return structuredClone(def!.example);
}

describe('video.slideshow', () => {
  it('runs its catalog example (text card + PNG + WAV soundtrack) to H.264/AAC at the frame size', async () => {
    const example = await catalogExample('video.slideshow');
    const slides = example.slides as Record<string, unknown>[];
    for (const s of slides) if (s.fileId) s.fileId = ids.png;
    example.soundtrackFileId = ids.wav; // 2 s of audio, padded with silence to the 5 s video
    const { quote, done } = await run(secret, 'video.slideshow', example);
    expect(quote.estimatedUnits).toBe(5);
    expect(quote.maximumChargeMicros).toBe(5 * price('video.slideshow'));
    const { probe, video, audio } = await artifact(secret, done);
    expect(video).toMatchObject({ codec_name: 'h264', width: 1280, height: 720 });
    expect(Math.abs(Number(probe.format.duration) - 5)).toBeLessThan(0.2);
    expect(Math.abs(Number(video.duration) - 5)).toBeLessThan(0.2);
    expect(audio.map((s) => s.codec_name)).toEqual(['aac']);
    expect(Math.abs(Number(audio[0]!.duration) - 5)).toBeLessThan(0.2);
    expectCharge('video.slideshow', done, quote, video);
    expect(done.output).toMatchObject({ width: 1280, height: 720, durationSeconds: 5 });
  });

  it('letterboxes a JPEG, trims an MP3 soundtrack to the video and rounds durations to frames', async () => {
    // 3.0 s at 30 fps over a portrait JPEG and a text card; the 2 s MP3 is longer than nothing, shorter than the video
    const args = {
      slides: [
        { fileId: ids.jpeg, seconds: 0.5, background: '#336699' },
        { text: 'Ünïcode & <b>tags</b> "quoted"', seconds: 1.3 },
        { fileId: ids.jpeg, seconds: 1.2 },
      ],
      soundtrackFileId: ids.mp3,
      width: 320,
      height: 240,
      fps: 30,
    };
    const { quote, done } = await run(secret, 'video.slideshow', args);
    expect(quote.estimatedUnits).toBe(3);
    const { video, audio } = await artifact(secret, done);
    expect(video).toMatchObject({ codec_name: 'h264', width: 320, height: 240 });
    expect(Math.abs(Number(video.duration) - 3)).toBeLessThan(0.2);
    expect(audio.map((s) => s.codec_name)).toEqual(['aac']);
    expect(Math.abs(Number(audio[0]!.duration) - 3)).toBeLessThan(0.2);
    expect((done.output as unknown as { frames: number }).frames).toBe(90);
    expectCharge('video.slideshow', done, quote, video);
  });

  it('makes a video from text cards alone: no uploads, no audio stream', async () => {
    const args = {
      slides: [
        { text: 'One', seconds: 1 },
        { text: 'Two\nlines', seconds: 0.5, background: '#ffffff', color: '#000000' },
      ],
      width: 256,
      height: 144,
      fps: 24,
    };
    const { quote, done } = await run(secret, 'video.slideshow', args);
    expect(quote.estimatedUnits).toBe(2); // 1.5 s starts two seconds
    const { video, audio } = await artifact(secret, done);
    expect(video).toMatchObject({ codec_name: 'h264', width: 256, height: 144 });
    expect(Math.abs(Number(video.duration) - 1.5)).toBeLessThan(0.2);
    expect(audio).toEqual([]);
    expectCharge('video.slideshow', done, quote, video);
    expect(done.chargedMicros).toBe(2 * price('video.slideshow'));
  });

  it('fails a PNG that does not decode with invalid_input_file, free, the reservation released', async () => {
    const before = await projectBalance(stack.db, p.projectId);
    // garbage after the magic number is refused at upload; a PNG cut in half passes (its header is whole)
    const garbage = Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), randomBytes(2048)]);
    await expectUploadRefused(stack, secret, p.projectId, 'image/png', garbage);
    const png = await makeMedia.png('320x200');
    const fileId = await upload(stack, secret, 'image/png', png.subarray(0, Math.floor(png.length / 2)));
    const { done } = await run(secret, 'video.slideshow', {
      slides: [
        { text: 'x', seconds: 1 },
        { fileId, seconds: 1 },
      ],
      width: 320,
      height: 240,
    });
    expect(done).toMatchObject({ status: 'failed', errorCode: 'invalid_input_file', chargedMicros: 0 });
    // the probe reads the header, which is whole; decoding the pixels fails in render, uncharged
    expect(done.steps.map((s) => [s.name, s.status, s.costMicros])).toEqual([
      ['probe', 'succeeded', 0],
      ['render', 'failed', 0],
    ]);
    expect(await projectBalance(stack.db, p.projectId)).toEqual({ available: before.available, reserved: 0 });
  });
});

describe('video.transcode', () => {
  it('runs its catalog example: resized, trimmed, AAC kept', async () => {
    const example = await catalogExample('video.transcode');
    example.fileId = ids.mp4;
    const { quote, done } = await run(secret, 'video.transcode', example);
    const seconds = example.durationSeconds as number;
    expect(quote.estimatedUnits).toBe(Math.ceil(seconds));
    const { probe, video, audio } = await artifact(secret, done);
    // 320x240 input at the example's width: the height follows the 4:3 aspect
    const width = example.width as number;
    expect(video).toMatchObject({ codec_name: 'h264', width, height: (width * 3) / 4 });
    expect(Math.abs(Number(video.duration) - seconds)).toBeLessThan(0.2);
    expect(Math.abs(Number(probe.format.duration) - seconds)).toBeLessThan(0.2);
    expect(audio.map((s) => s.codec_name)).toEqual(['aac']);
    expectCharge('video.transcode', done, quote, video);
  });

  it('defaults to the end of the input, keeps its size, drops audio on request and charges what it produced', async () => {
    const { quote, done } = await run(secret, 'video.transcode', { fileId: ids.mp4, startSeconds: 1, audio: false, crf: 35 });
    // reserved for the 2 s the upload has after startSeconds (not the 300 s cap), and charged for them
    expect(quote.estimatedUnits).toBe(2);
    expect(done.reservedMicros).toBe(2 * price('video.transcode'));
    const { video, audio } = await artifact(secret, done);
    expect(video).toMatchObject({ codec_name: 'h264', width: 320, height: 240 });
    expect(Math.abs(Number(video.duration) - 2)).toBeLessThan(0.2);
    expect(audio).toEqual([]);
    expectCharge('video.transcode', done, quote, video);
    expect(done.chargedMicros).toBe(2 * price('video.transcode'));
    expect(await projectBalance(stack.db, p.projectId)).toMatchObject({ reserved: 0 });
  });

  it('refuses a corrupt MP4 (ftyp header, garbage after) at upload with file_content_mismatch: nothing stored, nothing reserved', async () => {
    const before = await projectBalance(stack.db, p.projectId);
    const ftyp = Buffer.concat([Buffer.from([0, 0, 0, 0x18]), Buffer.from('ftypisom\0\0\x02\0isomiso2', 'latin1')]);
    await expectUploadRefused(stack, secret, p.projectId, 'video/mp4', Buffer.concat([ftyp, randomBytes(4096)]));
    expect(await projectBalance(stack.db, p.projectId)).toEqual(before);
  });

  it.each([
    [10, 'probe', /startSeconds.*beyond the end/],
    // inside the container's length but after the last frame starts: nothing is encoded
    [2.99, 'transcode', /no video frames at or after startSeconds/],
  ])('fails startSeconds %d of a 3 s input in %s with invalid_input_file, charge 0', async (startSeconds, step, message) => {
    const before = await projectBalance(stack.db, p.projectId);
    const { done } = await run(secret, 'video.transcode', { fileId: ids.mp4, startSeconds, durationSeconds: 1 });
    expect(done).toMatchObject({ status: 'failed', errorCode: 'invalid_input_file', chargedMicros: 0 });
    expect(done.errorMessage).toMatch(message);
    expect(done.steps.at(-1)).toMatchObject({ name: step, status: 'failed', costMicros: 0 });
    expect(await projectBalance(stack.db, p.projectId)).toEqual({ available: before.available, reserved: 0 });
  });
});

describe('input bounds', () => {
  const slide = (seconds = 1) => ({ text: 'x', seconds });
  const cases: [string, string, () => Record<string, unknown>][] = [
    ['21 slides', 'video.slideshow', () => ({ slides: Array.from({ length: 21 }, () => slide()) })],
    ['no slides', 'video.slideshow', () => ({ slides: [] })],
    ['a 31 s slide', 'video.slideshow', () => ({ slides: [slide(31)] })],
    ['a 0.4 s slide', 'video.slideshow', () => ({ slides: [slide(0.4)] })],
    ['more than 300 s in total', 'video.slideshow', () => ({ slides: Array.from({ length: 11 }, () => slide(30)) })],
    ['an odd width', 'video.slideshow', () => ({ slides: [slide()], width: 321 })],
    ['a height above 1080', 'video.slideshow', () => ({ slides: [slide()], height: 1082 })],
    ['an fps outside the enum', 'video.slideshow', () => ({ slides: [slide()], fps: 60 })],
    ['text longer than 500 characters', 'video.slideshow', () => ({ slides: [{ text: 'x'.repeat(501), seconds: 1 }] })],
    ['a slide with both fileId and text', 'video.slideshow', () => ({ slides: [{ text: 'x', fileId: ids.png, seconds: 1 }] })],
    ['a text colour on an image slide', 'video.slideshow', () => ({ slides: [{ fileId: ids.png, seconds: 1, color: '#ffffff' }] })],
    ['a colour that is not #rrggbb', 'video.slideshow', () => ({ slides: [{ text: 'x', seconds: 1, color: 'red;drawtext' }] })],
    ['durationSeconds 301', 'video.transcode', () => ({ fileId: ids.mp4, durationSeconds: 301 })],
    ['durationSeconds 0', 'video.transcode', () => ({ fileId: ids.mp4, durationSeconds: 0 })],
    ['crf 50', 'video.transcode', () => ({ fileId: ids.mp4, crf: 50 })],
    ['an odd width', 'video.transcode', () => ({ fileId: ids.mp4, width: 641 })],
    ['a negative startSeconds', 'video.transcode', () => ({ fileId: ids.mp4, startSeconds: -1 })],
  ];

  it.each(cases)('%s (%s) is a 400 invalid_arguments with nothing reserved', async (_what, tool, args) => {
    const q = await stack.http().post('/tools/quote').set(bearer(secret)).send({ tool, arguments: args() });
    expect(q.status).toBe(400);
    expect(q.body.error).toMatchObject({ status: 'INVALID_ARGUMENT', message: 'invalid_arguments' });
    const version = (await stack.http().get('/tools').set(bearer(secret))).body.data.priceVersion as string;
    const before = await projectBalance(stack.db, p.projectId);
    const countBefore = await stack.db('executions').where({ project_id: p.projectId }).count<{ n: string }[]>({ n: '*' });
    const sub = await stack
      .http()
      .post(`/tools/${tool}`)
      .set({ ...bearer(secret), 'Idempotency-Key': `b-${randomBytes(6).toString('hex')}` })
      .send({ tool, arguments: args(), priceVersion: version, maximumChargeMicros: 10_000_000 });
    expect(sub.status).toBe(400);
    expect(sub.body.error).toMatchObject({ status: 'INVALID_ARGUMENT', message: 'invalid_arguments' });
    expect(await projectBalance(stack.db, p.projectId)).toEqual({ available: before.available, reserved: 0 });
    const countAfter = await stack.db('executions').where({ project_id: p.projectId }).count<{ n: string }[]>({ n: '*' });
    expect(countAfter[0]!.n).toBe(countBefore[0]!.n);
  });

  it('every example of both tools validates against its own inputSchema and is quoted per second', () => {
    const catalog = new Catalog({ enableTestTools: false });
    for (const name of ['video.slideshow', 'video.transcode']) {
      const tool = catalog.get(name)!;
      for (const example of [tool.example, ...tool.models.map((m) => ({ ...m.example, model: m.id }))]) {
        const resolved = catalog.resolve(name, example);
        expect(resolved.plan.map((s) => typeof s.timeoutMs)).toEqual(['number', 'number']);
        const q = catalog.quote(resolved, DEFAULT_PRICE_LIST, 'v');
        expect(q.unit).toBe('second');
        expect(q.maximumChargeMicros).toBe(q.estimatedUnits * price(name));
      }
    }
  });
});
