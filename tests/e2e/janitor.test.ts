import { ObjectStore } from '@tes/storage';
import { bearer, startStack, waitForExecution, type TestStack } from '../stack';

let stack: TestStack;
let store: ObjectStore;

beforeAll(async () => {
  stack = await startStack();
  store = new ObjectStore(stack.config.s3);
});

afterAll(async () => {
  store?.close();
  if (!stack) return;
  const audit = await stack.audit();
  await stack.stop();
  expect(audit.problems).toEqual([]);
});

/** A real 1x1 PNG (uploads are measured), made distinct by bytes after its end. */
const PNG = Buffer.concat([
  Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==', 'base64'),
  Buffer.from('janitor test'),
]);

it('deletes artifacts past their deadline: the object goes and the download says artifact_expired', async () => {
  const p = await stack.seed({ creditMicros: 10_000 });
  const v = (await stack.http().get('/tools').set(bearer(p.secret))).body.data.priceVersion;
  const sub = await stack
    .http()
    .post('/tools/test.sleep')
    .set({ ...bearer(p.secret), 'Idempotency-Key': 'janitor-art-1' })
    .send({ tool: 'test.sleep', arguments: { seconds: 0, steps: 1, costMicrosPerStep: 1 }, priceVersion: v, maximumChargeMicros: 1 });
  const done = await waitForExecution(stack, p.secret, sub.body.data.id);
  const art = (done.output as { artifacts: { id: string }[] }).artifacts[0]!;
  const row = await stack.db('artifacts').where({ id: art.id }).first();
  expect((await store.get(row.storage_key)).length).toBeGreaterThan(0);

  await stack
    .db('artifacts')
    .where({ id: art.id })
    .update({ expires_at: stack.db.raw("now() - interval '1 second'") });
  const swept = await stack.relay!.relay.janitor();
  expect(swept.artifacts).toBe(1);
  await expect(store.get(row.storage_key)).rejects.toThrow();
  expect((await stack.db('artifacts').where({ id: art.id }).first()).deleted_at).not.toBeNull();
  const dl = await stack
    .http()
    .get(`/tools/executions/${String(done.id)}/artifacts/${art.id}/download`)
    .set(bearer(p.secret));
  expect(dl.status).toBe(404);
  expect(dl.body.error).toEqual({ status: 'NOT_FOUND', message: 'artifact_expired' });
  // a second sweep finds nothing more to do
  expect((await stack.relay!.relay.janitor()).artifacts).toBe(0);
});

it('deletes expired uploads; the same content uploaded again revives the same id with a new deadline and its bytes', async () => {
  const p = await stack.seed();
  const first = await stack
    .http()
    .post('/tools/upload')
    .set(bearer(p.secret))
    .send({ mimeType: 'image/png', data: PNG.toString('base64') });
  const row = await stack.db('files').where({ id: first.body.data.id }).first();
  await stack
    .db('files')
    .where({ id: row.id })
    .update({ expires_at: stack.db.raw("now() - interval '1 second'") });
  const swept = await stack.relay!.relay.janitor();
  expect(swept.files).toBe(1);
  await expect(store.get(row.storage_key)).rejects.toThrow();

  const again = await stack
    .http()
    .post('/tools/upload')
    .set(bearer(p.secret))
    .send({ mimeType: 'image/png', data: PNG.toString('base64') });
  expect(again.status).toBe(200);
  expect(again.body.data.id).toBe(first.body.data.id);
  expect(Date.parse(again.body.data.expiresAt)).toBeGreaterThan(Date.now() + 29 * 86_400_000);
  expect((await store.get(row.storage_key)).equals(PNG)).toBe(true);
  expect((await stack.db('files').where({ id: row.id }).first()).deleted_at).toBeNull();
});

it("the relay's retention removes rate-limit windows that ended over an hour ago", async () => {
  await stack.db('rate_limits').insert({ key: 'key:old', points: 3, expire: Date.now() - 2 * 3_600_000 });
  await stack.db('rate_limits').insert({ key: 'key:recent', points: 3, expire: Date.now() - 60_000 });
  const swept = await stack.relay!.retention.pass();
  expect(swept.rate_limits).toBe(1);
  expect(await stack.db('rate_limits').where({ key: 'key:old' })).toHaveLength(0);
  expect(await stack.db('rate_limits').where({ key: 'key:recent' })).toHaveLength(1);
});
