import { randomBytes } from 'node:crypto';
import sharp from 'sharp';
import { downloadArtifact, expectUploadRefused, ffmpegMake, makeMedia, runTool, upload } from '../media';
import { bearer, projectBalance, useStack } from '../stack';

/**
 * image.transform and video.thumbnail through the real stack: uploads generated with ffmpeg,
 * artifacts downloaded and decoded, charges checked against the ledger-backed balance.
 */
const stack = useStack();
const CREDIT = 1_000_000;
const TRANSFORM_MP = 1_000; // DEFAULT_PRICE_LIST: image.transform per started megapixel
const THUMB_FRAME = 500; // video.thumbnail per frame

type Execution = Record<string, unknown> & { output: { artifacts: { id: string; mimeType: string }[] } & Record<string, unknown> };

async function catalogExample(secret: string, tool: string): Promise<Record<string, unknown>> {
  const res = await stack.http().get('/tools').set(bearer(secret));
  expect(res.status).toBe(200);
  const def = (res.body.data.tools as { name: string; available: boolean; example: Record<string, unknown> }[]).find((t) => t.name === tool);
  expect(def?.available).toBe(true);
  return structuredClone(def!.example);
}

async function quoteMax(secret: string, tool: string, args: Record<string, unknown>): Promise<number> {
  const q = await stack.http().post('/tools/quote').set(bearer(secret)).send({ tool, arguments: args });
  expect(q.status).toBe(200);
  return q.body.data.maximumChargeMicros as number;
}

async function artifactsOf(secret: string, e: Execution): Promise<Buffer[]> {
  return Promise.all(e.output.artifacts.map((a) => downloadArtifact(stack, secret, e.id as string, a.id)));
}

/** A failed execution charged nothing and gave the whole reservation back. */
async function expectFailedFree(projectId: string, e: Record<string, unknown>, code: string, message?: RegExp): Promise<void> {
  expect(e.status).toBe('failed');
  expect(e.errorCode).toBe(code);
  if (message) expect(e.errorMessage).toMatch(message);
  expect(e.chargedMicros).toBe(0);
  expect(e.reservedMicros).toBeGreaterThan(0);
  expect(await projectBalance(stack.db, projectId)).toEqual({ available: CREDIT, reserved: 0 });
}

const pngMagicGarbage = () => Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), randomBytes(4_000)]);

describe('image.transform', () => {
  it('runs its catalog example on an uploaded PNG: crop, rotate 90, cover 360x600 JPEG, charged 1 MP', async () => {
    const p = await stack.seed({ creditMicros: CREDIT });
    const args = await catalogExample(p.secret, 'image.transform');
    args.fileId = await upload(stack, p.secret, 'image/png', await makeMedia.png('320x200'));
    expect(await quoteMax(p.secret, 'image.transform', args)).toBe(1 * TRANSFORM_MP);
    const e = (await runTool(stack, p.secret, 'image.transform', args)) as Execution;
    expect(e.status).toBe('succeeded');
    expect((e.steps as { name: string; costMicros: number }[]).map((s) => [s.name, s.costMicros])).toEqual([
      ['probe', 0],
      ['transform', TRANSFORM_MP],
    ]);
    expect(e.chargedMicros).toBe(1 * TRANSFORM_MP); // 360x600 = 0.216 MP -> 1 started megapixel
    const [jpeg, ...rest] = await artifactsOf(p.secret, e);
    expect(rest).toHaveLength(0);
    const meta = await sharp(jpeg).metadata();
    expect([meta.format, meta.width, meta.height]).toEqual(['jpeg', 360, 600]);
    expect(e.output).toMatchObject({ width: 360, height: 600, format: 'jpeg' });
    expect(await projectBalance(stack.db, p.projectId)).toEqual({ available: CREDIT - TRANSFORM_MP, reserved: 0 });
  });

  it('charges the actual output megapixels, below the quoted maximum, and keeps the input format by default', async () => {
    const p = await stack.seed({ creditMicros: CREDIT });
    const png = await upload(stack, p.secret, 'image/png', await makeMedia.png('320x200'));
    const jpg = await upload(stack, p.secret, 'image/jpeg', await makeMedia.jpeg('320x200'));

    // inside 2000x2000: the upload's 16:10 fills 2000x1250 = 2.5 MP -> 3, quoted from its measured size
    const inside = { fileId: png, resize: { width: 2000, height: 2000, fit: 'inside' } };
    expect(await quoteMax(p.secret, 'image.transform', inside)).toBe(3 * TRANSFORM_MP);
    const a = (await runTool(stack, p.secret, 'image.transform', inside)) as Execution;
    expect(a.status).toBe('succeeded');
    expect([a.reservedMicros, a.chargedMicros]).toEqual([3 * TRANSFORM_MP, 3 * TRANSFORM_MP]);
    const ma = await sharp((await artifactsOf(p.secret, a))[0]).metadata();
    expect([ma.format, ma.width, ma.height]).toEqual(['png', 2000, 1250]);

    // no resize: the quote reserves the upload's own size (not the 17 MP output cap); a rotated 200x320 costs 1
    const turned = { fileId: jpg, rotate: 270 };
    expect(await quoteMax(p.secret, 'image.transform', turned)).toBe(TRANSFORM_MP);
    const b = (await runTool(stack, p.secret, 'image.transform', turned)) as Execution;
    expect([b.status, b.reservedMicros, b.chargedMicros]).toEqual(['succeeded', TRANSFORM_MP, TRANSFORM_MP]);
    const mb = await sharp((await artifactsOf(p.secret, b))[0]).metadata();
    expect([mb.format, mb.width, mb.height]).toEqual(['jpeg', 200, 320]);

    expect(await projectBalance(stack.db, p.projectId)).toEqual({ available: CREDIT - 4 * TRANSFORM_MP, reserved: 0 });
  });

  it.each([
    ['a crop reaching outside the image', { crop: { left: 300, top: 0, width: 100, height: 100 } }, /outside the 320x200 input/],
    ['an outside fit that would exceed 4096 per side', { resize: { width: 4096, height: 4096, fit: 'outside' } }, /above 4096 per side/],
  ])('%s fails with invalid_input_file after decoding, nothing charged', async (_what, extra, message) => {
    const p = await stack.seed({ creditMicros: CREDIT });
    const fileId = await upload(stack, p.secret, 'image/png', await makeMedia.png('320x200'));
    const e = await runTool(stack, p.secret, 'image.transform', { fileId, ...extra });
    await expectFailedFree(p.projectId, e, 'invalid_input_file', message);
  });

  it('bytes with the PNG magic number and garbage after it are refused at upload (file_content_mismatch), nothing stored', async () => {
    const p = await stack.seed({ creditMicros: CREDIT });
    await expectUploadRefused(stack, p.secret, p.projectId, 'image/png', pngMagicGarbage());
  });

  it.each([
    [
      'a PNG cut in half (valid header, truncated pixels)',
      async () => {
        const png = await makeMedia.png('320x200');
        return png.subarray(0, Math.floor(png.length / 2));
      },
    ],
  ])('a corrupt upload (%s) fails the probe with invalid_input_file, nothing charged', async (_what, bytes) => {
    const p = await stack.seed({ creditMicros: CREDIT });
    const fileId = await upload(stack, p.secret, 'image/png', await bytes());
    const e = await runTool(stack, p.secret, 'image.transform', { fileId, resize: { width: 100, height: 100, fit: 'fill' } });
    await expectFailedFree(p.projectId, e, 'invalid_input_file');
    expect((e.steps as { name: string; status: string }[]).map((s) => [s.name, s.status])).toEqual([['probe', 'failed']]);
  });
});

describe('video.thumbnail', () => {
  it('runs its catalog example on an uploaded MP4: one PNG per time at the requested width, charged per frame', async () => {
    const p = await stack.seed({ creditMicros: CREDIT });
    const args = await catalogExample(p.secret, 'video.thumbnail');
    args.fileId = await upload(stack, p.secret, 'video/mp4', await makeMedia.mp4(2, '320x240'));
    const frames = (args.times as number[]).length;
    expect(frames).toBe(2);
    expect(await quoteMax(p.secret, 'video.thumbnail', args)).toBe(frames * THUMB_FRAME);
    const e = (await runTool(stack, p.secret, 'video.thumbnail', args)) as Execution;
    expect(e.status).toBe('succeeded');
    expect(e.chargedMicros).toBe(frames * THUMB_FRAME);
    const pngs = await artifactsOf(p.secret, e);
    expect(pngs).toHaveLength(frames);
    for (const png of pngs) {
      const m = await sharp(png).metadata();
      expect([m.format, m.width, m.height]).toEqual(['png', 160, 120]);
    }
    // testsrc moves over time: frames at 0 s and 1.5 s differ
    expect(pngs[0]!.equals(pngs[1]!)).toBe(false);
    expect(e.output).toMatchObject({ frames, width: 160, height: 120 });
    expect(await projectBalance(stack.db, p.projectId)).toEqual({ available: CREDIT - frames * THUMB_FRAME, reserved: 0 });
  });

  it('keeps the source width without `width`, and a time after the last frame but within the duration gives the last frame', async () => {
    const p = await stack.seed({ creditMicros: CREDIT });
    const fileId = await upload(stack, p.secret, 'video/mp4', await makeMedia.mp4(2, '320x240'));
    // 25 fps: the last frame is at 1.96 s, the video lasts 2.00 s
    const e = (await runTool(stack, p.secret, 'video.thumbnail', { fileId, times: [1.96, 1.99, 2] })) as Execution;
    expect(e.status).toBe('succeeded');
    expect(e.chargedMicros).toBe(3 * THUMB_FRAME);
    const pngs = await artifactsOf(p.secret, e);
    expect(pngs).toHaveLength(3);
    for (const png of pngs) {
      const m = await sharp(png).metadata();
      expect([m.format, m.width, m.height]).toEqual(['png', 320, 240]);
    }
    expect(pngs[1]!.equals(pngs[0]!)).toBe(true);
    expect(pngs[2]!.equals(pngs[0]!)).toBe(true);
  });

  it('a time beyond the duration fails with invalid_input_file before extraction, nothing charged (no clamping)', async () => {
    const p = await stack.seed({ creditMicros: CREDIT });
    const fileId = await upload(stack, p.secret, 'video/mp4', await makeMedia.mp4(2, '320x240'));
    const e = await runTool(stack, p.secret, 'video.thumbnail', { fileId, times: [0.5, 5] });
    await expectFailedFree(p.projectId, e, 'invalid_input_file', /time 5 s is beyond the video's duration/);
    expect((e.steps as { name: string; status: string }[]).map((s) => [s.name, s.status])).toEqual([['probe', 'failed']]);
  });

  it('bytes with an ftyp box and garbage after it are refused at upload (file_content_mismatch), nothing stored', async () => {
    const p = await stack.seed({ creditMicros: CREDIT });
    const garbage = Buffer.concat([Buffer.from([0, 0, 0, 0x18]), Buffer.from('ftypisom', 'latin1'), randomBytes(4_000)]);
    await expectUploadRefused(stack, p.secret, p.projectId, 'video/mp4', garbage);
  });

  it.each([
    ['an MP4 without a video stream', () => ffmpegMake(['-f', 'lavfi', '-i', 'sine=frequency=440:duration=1', '-c:a', 'aac'], 'a.mp4'), /no video stream/],
  ])('%s fails the probe with invalid_input_file, nothing charged', async (_what, bytes, message) => {
    const p = await stack.seed({ creditMicros: CREDIT });
    const fileId = await upload(stack, p.secret, 'video/mp4', await bytes());
    const e = await runTool(stack, p.secret, 'video.thumbnail', { fileId, times: [0] });
    await expectFailedFree(p.projectId, e, 'invalid_input_file', message);
  });
});

describe('refused before anything is reserved', () => {
  const sends = async (secret: string, tool: string, args: Record<string, unknown>) => {
    const version = (await stack.http().get('/tools').set(bearer(secret))).body.data.priceVersion as string;
    const quote = await stack.http().post('/tools/quote').set(bearer(secret)).send({ tool, arguments: args });
    const submit = await stack
      .http()
      .post(`/tools/${tool}`)
      .set({ ...bearer(secret), 'Idempotency-Key': `bad-${Math.random().toString(36).slice(2, 12)}` })
      .send({ tool, arguments: args, priceVersion: version, maximumChargeMicros: 500_000 });
    return [quote, submit];
  };

  async function nothingReserved(projectId: string): Promise<void> {
    expect(await projectBalance(stack.db, projectId)).toEqual({ available: CREDIT, reserved: 0 });
    const rows = await stack.db('executions').count<{ n: string }[]>({ n: '*' }).where({ project_id: projectId });
    expect(Number(rows[0]!.n)).toBe(0);
  }

  const image = (f: string) => ({ fileId: f, resize: { width: 100, height: 100 } });
  const thumb = (f: string) => ({ fileId: f, times: [0] });
  const cases: [string, string, (f: string) => Record<string, unknown>, string][] = [
    ['image.transform', 'resize width 4097', (f) => ({ ...image(f), resize: { width: 4097, height: 100 } }), '/resize/width'],
    ['image.transform', 'resize height 0', (f) => ({ ...image(f), resize: { width: 100, height: 0 } }), '/resize/height'],
    ['image.transform', 'an unknown fit', (f) => ({ ...image(f), resize: { width: 100, height: 100, fit: 'stretch' } }), '/resize/fit'],
    ['image.transform', 'a negative crop offset', (f) => ({ ...image(f), crop: { left: -1, top: 0, width: 10, height: 10 } }), '/crop/left'],
    ['image.transform', 'a crop wider than any input', (f) => ({ ...image(f), crop: { left: 0, top: 0, width: 16_385, height: 10 } }), '/crop/width'],
    ['image.transform', 'rotate 45', (f) => ({ ...image(f), rotate: 45 }), '/rotate'],
    ['image.transform', 'quality 101', (f) => ({ ...image(f), quality: 101 }), '/quality'],
    ['image.transform', 'format webp', (f) => ({ ...image(f), format: 'webp' }), '/format'],
    ['image.transform', 'a malformed fileId', () => image('file_nope'), '/fileId'],
    ['video.thumbnail', 'no times', (f) => ({ ...thumb(f), times: [] }), '/times'],
    ['video.thumbnail', '11 times', (f) => ({ ...thumb(f), times: Array.from({ length: 11 }, (_, i) => i / 10) }), '/times'],
    ['video.thumbnail', 'a negative time', (f) => ({ ...thumb(f), times: [0, -0.5] }), '/times/1'],
    ['video.thumbnail', 'a time above 3600 s', (f) => ({ ...thumb(f), times: [3600.5] }), '/times/0'],
    ['video.thumbnail', 'width 15', (f) => ({ ...thumb(f), width: 15 }), '/width'],
    ['video.thumbnail', 'width 1921', (f) => ({ ...thumb(f), width: 1921 }), '/width'],
    ['video.thumbnail', 'a fractional width', (f) => ({ ...thumb(f), width: 100.5 }), '/width'],
  ];

  it.each(cases)('%s rejects %s with 400 invalid_arguments', async (tool, _what, args, pointer) => {
    const p = await stack.seed({ creditMicros: CREDIT });
    const media =
      tool === 'image.transform'
        ? await upload(stack, p.secret, 'image/png', await makeMedia.png('64x64'))
        : await upload(stack, p.secret, 'video/mp4', await makeMedia.mp4(1, '64x64'));
    for (const res of await sends(p.secret, tool, args(media))) {
      expect(res.status).toBe(400);
      expect(res.body.error).toMatchObject({ status: 'INVALID_ARGUMENT', message: 'invalid_arguments' });
      expect((res.body.error.details.errors as { instancePath: string }[]).map((x) => x.instancePath)).toContain(pointer);
    }
    await nothingReserved(p.projectId);
  });

  it.each([
    ['image.transform', 'a WAV', 'audio/wav', () => makeMedia.wav(1), (f: string) => image(f)],
    ['image.transform', 'an MP4', 'video/mp4', () => makeMedia.mp4(1, '64x64'), (f: string) => image(f)],
    ['video.thumbnail', 'a PNG', 'image/png', () => makeMedia.png('64x64'), (f: string) => thumb(f)],
  ])('%s refuses %s upload named as its input at quote time', async (tool, _what, mime, make, args) => {
    const p = await stack.seed({ creditMicros: CREDIT });
    const fileId = await upload(stack, p.secret, mime, await make());
    for (const res of await sends(p.secret, tool, args(fileId))) {
      expect(res.status).toBe(400);
      expect(res.body.error.message).toBe('invalid_arguments');
      expect(res.body.error.details.errors[0]).toMatchObject({ instancePath: '/fileId', keyword: 'fileFormat' });
    }
    await nothingReserved(p.projectId);
  });
});
