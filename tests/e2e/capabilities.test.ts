import { bearer, startStack, type TestStack } from '../stack';

/** A model whose programs the workers lack is shown unavailable, not failed at run time. */
let stack: TestStack;

beforeAll(async () => {
  stack = await startStack({ relay: false });
});

afterAll(async () => {
  await stack?.stop();
});

it('workers report at start which models they can run', async () => {
  const rows = await stack.db('tool_capabilities').select('tool', 'model', 'available', 'missing', 'reported_by');
  const byKey = Object.fromEntries(rows.map((r: { tool: string; model: string }) => [`${r.tool}:${r.model}`, r]));
  // this machine has ffmpeg, ffprobe and espeak-ng (CI installs them)
  for (const key of ['audio.transcode:ffmpeg', 'audio.speech:espeak-ng', 'video.thumbnail:ffmpeg', 'image.render:sharp']) {
    expect(byKey[key]).toMatchObject({ available: true, missing: [], reported_by: stack.worker!.workerId });
  }
});

it('a model reported unavailable disappears from the catalog and is refused before anything is reserved', async () => {
  const p = await stack.seed({ creditMicros: 100_000 });
  await stack
    .db('tool_capabilities')
    .where({ tool: 'audio.transcode', model: 'ffmpeg' })
    .update({ available: false, missing: ['ffmpeg'] });
  try {
    const tools = (await stack.http().get('/tools').set(bearer(p.secret))).body.data.tools as {
      name: string;
      available: boolean;
      models: { available: boolean }[];
    }[];
    const transcode = tools.find((t) => t.name === 'audio.transcode')!;
    expect(transcode.available).toBe(false);
    expect(transcode.models.every((m) => !m.available)).toBe(true);
    expect(tools.find((t) => t.name === 'audio.speech')!.available).toBe(true);
    const q = await stack
      .http()
      .post('/tools/quote')
      .set(bearer(p.secret))
      .send({ tool: 'audio.transcode', arguments: { fileId: 'file_01ARZ3NDEKTSV4RRFFQ69G5FAV', format: 'mp3' } });
    expect(q.status).toBe(404);
    expect(q.body.error.message).toBe('tool_unavailable');
    const row = await stack.db('projects').where({ id: p.projectId }).first();
    expect(row.reserved_micros).toBe(0);
  } finally {
    await stack.db('tool_capabilities').where({ tool: 'audio.transcode', model: 'ffmpeg' }).update({ available: true, missing: [] });
  }
});
