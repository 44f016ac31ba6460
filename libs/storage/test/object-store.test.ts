import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { startEmbeddedS3, type EmbeddedS3 } from '@tes/testing';
import { ObjectStore, type StorageOptions } from '../src';

/**
 * ObjectStore against a real S3-compatible server (the embedded s3rver the integration tests
 * use, answering only SigV4-signed requests): bytes in and out, deletes the janitor can
 * repeat, abort signals that stop a request, and presigned URLs that stop working when they
 * say they do.
 */
let s3: EmbeddedS3;
let options: StorageOptions;
let store: ObjectStore;

beforeAll(async () => {
  s3 = await startEmbeddedS3();
  options = {
    endpoint: s3.endpoint,
    publicEndpoint: s3.endpoint,
    bucket: `tes-store-${randomBytes(4).toString('hex')}`,
    region: 'us-east-1',
    accessKeyId: s3.accessKeyId,
    secretAccessKey: s3.secretAccessKey,
  };
  store = new ObjectStore(options);
  await store.ensureBucket();
});
afterAll(async () => {
  store?.close();
  await s3?.stop();
});

const key = () => `projects/prj_1/uploads/${randomBytes(8).toString('hex')}`;

it('returns the bytes it stored', async () => {
  const k = key();
  const body = randomBytes(70_000);
  await store.put({ key: k, body, contentType: 'image/png' });
  expect((await store.get(k)).equals(body)).toBe(true);
});

it('after delete the object is gone, and deleting it again is no error (the janitor may repeat a delete)', async () => {
  const k = key();
  await store.put({ key: k, body: Buffer.from('x'), contentType: 'text/plain' });
  await store.delete(k);
  await expect(store.get(k)).rejects.toMatchObject({ name: 'NoSuchKey' });
  await expect(store.delete(k)).resolves.toBeUndefined();
});

it('ensureBucket is idempotent; ping tells an existing bucket from a missing one and from a dead endpoint', async () => {
  await store.ensureBucket();
  expect(await store.ping()).toBe(true);
  const missing = new ObjectStore({ ...options, bucket: 'tes-no-such-bucket' });
  const dead = new ObjectStore({ ...options, endpoint: 'http://127.0.0.1:9', publicEndpoint: 'http://127.0.0.1:9' });
  try {
    expect(await missing.ping()).toBe(false);
    expect(await dead.ping()).toBe(false);
  } finally {
    missing.close();
    dead.close();
  }
});

it('a request whose signal is already aborted is not sent: nothing is stored', async () => {
  const k = key();
  const signal = AbortSignal.abort();
  await expect(store.put({ key: k, body: Buffer.from('late'), contentType: 'text/plain', signal })).rejects.toMatchObject({ name: 'AbortError' });
  await expect(store.get(k)).rejects.toMatchObject({ name: 'NoSuchKey' });
  await store.put({ key: k, body: Buffer.from('kept'), contentType: 'text/plain' });
  await expect(store.get(k, AbortSignal.abort())).rejects.toMatchObject({ name: 'AbortError' });
});

it('a signal aborted while the upload is under way rejects it at once', async () => {
  const controller = new AbortController();
  const started = Date.now();
  const put = store.put({ key: key(), body: randomBytes(20_000_000), contentType: 'video/mp4', signal: controller.signal });
  setTimeout(() => controller.abort(), 5);
  await expect(put).rejects.toMatchObject({ name: 'AbortError' });
  expect(Date.now() - started).toBeLessThan(2_000);
});

it('a presigned URL serves the object with the signed headers until it expires, then is refused', async () => {
  const k = key();
  const body = randomBytes(1_000);
  await store.put({ key: k, body, contentType: 'image/png' });
  const p = (await store.presignGet({ key: k, maxSeconds: 300, notAfter: new Date(Date.now() + 2_500), contentType: 'image/png', fileName: 'out.png' }))!;
  expect(p.ttlSeconds).toBeLessThanOrEqual(3);
  const res = await fetch(p.url);
  expect(res.status).toBe(200);
  expect(Buffer.from(await res.arrayBuffer()).equals(body)).toBe(true);
  expect(res.headers.get('content-type')).toBe('image/png');
  expect(res.headers.get('cache-control')).toBe('private, no-store');
  expect(res.headers.get('content-disposition')).toBe('attachment; filename="out.png"');
  // the signature covers the response overrides: a URL asking for another type is refused
  const tampered = new URL(p.url);
  tampered.searchParams.set('response-content-type', 'text/html');
  expect((await fetch(tampered)).status).toBe(403);

  await new Promise((r) => setTimeout(r, Math.max(0, p.expiresAt.getTime() - Date.now()) + 1_100));
  const late = await fetch(p.url);
  expect(late.status).toBe(403);
  await late.arrayBuffer();
});

describe('a store that never answers (issue #26)', () => {
  let silent: net.Server;
  const sockets = new Set<net.Socket>();
  let hung: ObjectStore;
  beforeAll(async () => {
    // accepts connections, reads the requests, never writes a byte back
    silent = net.createServer((s) => {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => undefined);
    });
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', () => resolve()));
    const port = (silent.address() as net.AddressInfo).port;
    hung = new ObjectStore({ ...options, endpoint: `http://127.0.0.1:${port}`, publicEndpoint: `http://127.0.0.1:${port}`, requestTimeoutMs: 1_000 });
  });
  afterAll(async () => {
    hung?.close();
    for (const s of sockets) s.destroy();
    await new Promise<void>((resolve) => silent.close(() => resolve()));
  });

  /** The call's outcome and time; one still pending after 20 s fails the test. */
  async function bounded(call: Promise<unknown>): Promise<{ rejected: boolean; ms: number }> {
    const started = Date.now();
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), 20_000)));
    const outcome = await Promise.race([
      call.then(
        () => 'resolved' as const,
        () => 'rejected' as const,
      ),
      late,
    ]);
    clearTimeout(timer);
    if (outcome === 'late') throw new Error('the request was still waiting after 20 s: no timeout applied');
    return { rejected: outcome === 'rejected', ms: Date.now() - started };
  }

  it('a put, a get and a delete each fail after the request timeout (per attempt, 3 attempts), not never', async () => {
    for (const call of [() => hung.put({ key: key(), body: randomBytes(1_000), contentType: 'image/png' }), () => hung.get(key()), () => hung.delete(key())]) {
      const r = await bounded(call());
      expect(r.rejected).toBe(true);
      // 3 attempts of 1 s and the SDK's backoff between them
      expect(r.ms).toBeGreaterThanOrEqual(900);
      expect(r.ms).toBeLessThan(15_000);
    }
  });

  it("a delete's signal bounds the whole call, retries included", async () => {
    const r = await bounded(hung.delete(key(), AbortSignal.timeout(300)));
    expect(r.rejected).toBe(true);
    expect(r.ms).toBeLessThan(1_500);
  });
});
