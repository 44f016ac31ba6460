import { sweepExpired } from '@tes/db';
import { ObjectStore } from '@tes/storage';
import { startTcpRelay, type TcpRelay } from '@tes/testing';
import { bearer, startStack, waitForExecution, type TestStack } from '../stack';

let stack: TestStack;
let store: ObjectStore;

beforeAll(async () => {
  // the relay's own janitor would sweep this file's expired rows between steps: the tests run it
  stack = await startStack({ env: { JANITOR_INTERVAL_MS: '86400000' } });
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
  // under a key of its own: a late delete of the old one cannot reach it (issue #26)
  const revived = await stack.db('files').where({ id: row.id }).first();
  expect(revived.storage_key).not.toBe(row.storage_key);
  expect((await store.get(revived.storage_key)).equals(PNG)).toBe(true);
  expect(revived.deleted_at).toBeNull();
});

it("the relay's retention removes rate-limit windows that ended over an hour ago", async () => {
  await stack.db('rate_limits').insert({ key: 'key:old', points: 3, expire: Date.now() - 2 * 3_600_000 });
  await stack.db('rate_limits').insert({ key: 'key:recent', points: 3, expire: Date.now() - 60_000 });
  const swept = await stack.relay!.retention.pass();
  expect(swept.rate_limits).toBe(1);
  expect(await stack.db('rate_limits').where({ key: 'key:old' })).toHaveLength(0);
  expect(await stack.db('rate_limits').where({ key: 'key:recent' })).toHaveLength(1);
});

/**
 * Issue #26: the janitor deleted objects inside its FOR UPDATE transaction, so a hung delete
 * held the rows (a re-upload of the same bytes waited on them) and stalled the janitor for good.
 * Here the janitor's object store is reached through a relay that swallows every request.
 */
describe('a delete that never returns', () => {
  const DELETE_TIMEOUT_MS = 1_500;
  let relay: TcpRelay;
  let hung: ObjectStore;
  beforeAll(async () => {
    relay = await startTcpRelay(stack.config.s3.endpoint, 80);
    relay.holdRequests(true);
    const endpoint = new URL(relay.url).origin;
    hung = new ObjectStore({ ...stack.config.s3, endpoint, publicEndpoint: endpoint });
  });
  afterAll(async () => {
    hung?.close();
    await relay?.close();
  });

  const png = (tag: string) => Buffer.concat([PNG, Buffer.from(tag)]);
  const upload = (secret: string, bytes: Buffer) =>
    stack
      .http()
      .post('/tools/upload')
      .set(bearer(secret))
      .send({ mimeType: 'image/png', data: bytes.toString('base64') });
  const expire = (id: string) =>
    stack
      .db('files')
      .where({ id })
      .update({ expires_at: stack.db.raw("now() - interval '1 second'") });

  /** A promise's value, or a failure naming what did not happen within `ms`. */
  async function within<T>(ms: number, what: string, p: Promise<T>): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_r, reject) => (timer = setTimeout(() => reject(new Error(`${what}: not done within ${ms} ms`)), ms)));
    try {
      return await Promise.race([p, late]);
    } finally {
      clearTimeout(timer);
    }
  }

  it('holds no row while it waits: a re-upload meanwhile answers within the delete timeout, keeps its bytes, and the janitor ends too', async () => {
    const p = await stack.seed();
    const [a, b] = [png('hung-a'), png('hung-b')];
    const first = [await upload(p.secret, a), await upload(p.secret, b)];
    expect(first.map((r) => r.status)).toEqual([200, 200]);
    const [fa, fb] = first.map((r) => r.body.data.id as string) as [string, string];
    const firstKeyA = (await stack.db('files').where({ id: fa }).first()).storage_key as string;
    await expire(fa);
    await expire(fb);

    let started!: () => void;
    const deleting = new Promise<void>((r) => (started = r));
    const sweepStarted = Date.now();
    const sweep = sweepExpired(
      stack.db,
      'files',
      100,
      (key, signal) => {
        started();
        return hung.delete(key, signal);
      },
      { deleteTimeoutMs: DELETE_TIMEOUT_MS },
    );
    await within(10_000, 'the janitor starting its deletes', deleting);

    // the same bytes again while the delete hangs
    const t0 = Date.now();
    const again = await within(15_000, 'the re-upload', upload(p.secret, a));
    const waited = Date.now() - t0;
    expect(again.status).toBe(200);
    expect(again.body.data.id).toBe(fa);
    // it waited for nothing: neither the store nor the janitor (well under the delete's timeout)
    expect(waited).toBeLessThan(DELETE_TIMEOUT_MS);

    const swept = await within(10_000, 'the janitor', sweep);
    expect(swept).toEqual({ deleted: 0, failed: 2 });
    expect(Date.now() - sweepStarted).toBeLessThan(DELETE_TIMEOUT_MS + 3_500);

    // the swallowed deletes reach the store late, once the network lets them through (the
    // janitor had stopped waiting): the revived file's bytes are under a key of its own
    relay.holdRequests(false);
    const landed = Date.now() + 10_000;
    while (
      await store.get(firstKeyA).then(
        () => true,
        () => false,
      )
    ) {
      if (Date.now() > landed) throw new Error('the late delete never reached the store');
      await new Promise((r) => setTimeout(r, 100));
    }
    const fileA = await stack.db('files').where({ id: fa }).first();
    expect(fileA.deleted_at).toBeNull();
    expect(fileA.delete_claim).toBeNull();
    expect(fileA.storage_key).not.toBe(firstKeyA);
    expect(fileA.storage_key.startsWith(`${firstKeyA}.`)).toBe(true);
    expect(Date.parse(again.body.data.expiresAt)).toBeGreaterThan(Date.now() + 29 * 86_400_000);
    expect((await store.get(fileA.storage_key)).equals(a)).toBe(true);

    // b was let go, not lost: the next pass with a store that answers deletes it; a stays
    const next = await sweepExpired(stack.db, 'files', 100, (key, signal) => store.delete(key, signal), { deleteTimeoutMs: 5_000 });
    expect(next).toEqual({ deleted: 1, failed: 0 });
    const fileB = await stack.db('files').where({ id: fb }).first();
    expect(fileB.deleted_at).not.toBeNull();
    await expect(store.get(fileB.storage_key)).rejects.toThrow();
    expect((await store.get(fileA.storage_key)).equals(a)).toBe(true);
    relay.holdRequests(true);
  });

  it('a claim left by a janitor that died is honoured until its deadline, then its file is claimed and deleted again', async () => {
    const p = await stack.seed();
    const bytes = png('crashed');
    const up = await upload(p.secret, bytes);
    const id = up.body.data.id as string;
    await expire(id);
    // a janitor claimed it and died before deleting
    await stack
      .db('files')
      .where({ id })
      .update({ delete_claim: '6f1d0e1e-0000-4000-8000-000000000001', delete_claim_until: stack.db.raw("now() + interval '30 seconds'") });
    const deleteHealthy = (key: string, signal: AbortSignal) => store.delete(key, signal);
    expect(await sweepExpired(stack.db, 'files', 100, deleteHealthy)).toEqual({ deleted: 0, failed: 0 });
    expect((await store.get(up.body.data.id ? (await stack.db('files').where({ id }).first()).storage_key : '')).equals(bytes)).toBe(true);
    // its deadline passes: the file is not forgotten
    await stack
      .db('files')
      .where({ id })
      .update({ delete_claim_until: stack.db.raw("now() - interval '1 second'") });
    expect(await sweepExpired(stack.db, 'files', 100, deleteHealthy)).toEqual({ deleted: 1, failed: 0 });
    expect((await stack.db('files').where({ id }).first()).deleted_at).not.toBeNull();
  });

  it("the previous release's revive of a claimed file is refused as retryable (40001), and goes through once the claim ended", async () => {
    const p = await stack.seed();
    const up = await upload(p.secret, png('old-release'));
    const id = up.body.data.id as string;
    await expire(id);
    await stack
      .db('files')
      .where({ id })
      .update({ delete_claim: '6f1d0e1e-0000-4000-8000-000000000002', delete_claim_until: stack.db.raw("now() + interval '30 seconds'") });
    // recordUpload as the release before issue #26 wrote it (it knows nothing of claims)
    const oldRevive = () =>
      stack.db.raw(
        `INSERT INTO files (id, project_id, sha256, format, mime_type, size_bytes, storage_key, expires_at)
         SELECT 'file_01ARZ3NDEKTSV4RRFFQ69G5FAV', project_id, sha256, format, mime_type, size_bytes, storage_key, tes_now() + interval '30 days'
           FROM files WHERE id = :id
         ON CONFLICT (project_id, sha256) DO UPDATE
            SET expires_at = excluded.expires_at, deleted_at = NULL
          WHERE files.expires_at <= tes_now() OR files.deleted_at IS NOT NULL
         RETURNING id`,
        { id },
      );
    await expect(oldRevive()).rejects.toMatchObject({ code: '40001' });
    await stack.db('files').where({ id }).update({ delete_claim: null, delete_claim_until: null });
    expect((await oldRevive()).rows).toEqual([{ id }]);
    // a file this release revived (its key has a suffix) revived again by the previous release,
    // which writes its bytes at the content's key: the row follows them there
    const contentKey = (await stack.db('files').where({ id }).first()).storage_key as string;
    await stack
      .db('files')
      .where({ id })
      .update({ storage_key: `${contentKey}.6f1d0e1e-0000-4000-8000-000000000003`, expires_at: stack.db.raw("now() - interval '1 second'") });
    expect((await oldRevive()).rows).toEqual([{ id }]);
    expect((await stack.db('files').where({ id }).first()).storage_key).toBe(contentKey);
  });
});
