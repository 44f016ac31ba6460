import { randomBytes } from 'node:crypto';
import { GetObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { ObjectStore, type StorageOptions } from '@tes/storage';
import { startEmbeddedS3, type EmbeddedS3 } from '@tes/testing';

/**
 * The embedded S3 server (`npm start`, every integration test) seen from outside, over a
 * socket with plain HTTP: without a valid SigV4 signature nothing is listed, read, written or
 * deleted, and s3rver's well-known S3RVER/S3RVER key pair signs nothing; the service's own
 * signed calls and presigned GETs still work, and a presigned GET's bytes come back marked
 * not to be cached.
 */
let s3: EmbeddedS3;
let store: ObjectStore;
let options: StorageOptions;
const bucket = `tes-s3sec-${randomBytes(4).toString('hex')}`;
const key = 'projects/prj_A/executions/exe_A/art_A.png';
const otherKey = 'projects/prj_B/uploads/abc';
const bytes = randomBytes(64);
const otherBytes = randomBytes(64);
const farFuture = () => new Date(Date.now() + 86_400_000);

beforeAll(async () => {
  s3 = await startEmbeddedS3();
  options = {
    endpoint: s3.endpoint,
    publicEndpoint: s3.endpoint,
    bucket,
    region: 'us-east-1',
    accessKeyId: s3.accessKeyId,
    secretAccessKey: s3.secretAccessKey,
  };
  store = new ObjectStore(options);
  await store.ensureBucket();
  await store.put({ key, body: bytes, contentType: 'image/png' });
  await store.put({ key: otherKey, body: otherBytes, contentType: 'image/png' });
});

afterAll(async () => {
  store?.close();
  await s3?.stop();
});

async function raw(method: string, pathOrUrl: string, init: { headers?: Record<string, string>; body?: string } = {}) {
  const res = await fetch(new URL(pathOrUrl, s3.endpoint), { method, headers: init.headers, body: init.body });
  return { status: res.status, body: Buffer.from(await res.arrayBuffer()), headers: res.headers };
}

async function expectUnchanged(): Promise<void> {
  expect((await store.get(key)).equals(bytes)).toBe(true);
  expect((await store.get(otherKey)).equals(otherBytes)).toBe(true);
}

async function presign(k = key): Promise<string> {
  const p = await store.presignGet({ key: k, maxSeconds: 60, notAfter: farFuture(), contentType: 'image/png', fileName: 'a.png' });
  return p!.url;
}

function amzDate(d = new Date()): string {
  return d
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d{3}/, '');
}

describe('requests without a valid SigV4 signature', () => {
  it('anonymous list, GET, HEAD, PUT, DELETE, bulk delete, list buckets and OPTIONS get 403 AccessDenied; nothing changes', async () => {
    const attempts: [string, string, string?][] = [
      ['GET', `/${bucket}?list-type=2`],
      ['GET', `/${bucket}`],
      ['GET', '/'],
      ['GET', `/${bucket}/${key}`],
      ['HEAD', `/${bucket}/${key}`],
      ['PUT', `/${bucket}/${key}`, 'replaced by an anonymous PUT'],
      ['PUT', `/${bucket}/projects/prj_A/new-object`, 'planted'],
      ['DELETE', `/${bucket}/${key}`],
      ['POST', `/${bucket}?delete`, `<Delete><Object><Key>${key}</Key></Object></Delete>`],
      ['DELETE', `/${bucket}`],
      ['OPTIONS', `/${bucket}/${key}`],
    ];
    for (const [method, path, body] of attempts) {
      const res = await raw(method, path, body === undefined ? {} : { body, headers: { 'Content-Type': 'application/octet-stream' } });
      expect([method, path, res.status]).toEqual([method, path, 403]);
      if (method !== 'HEAD') expect(res.body.toString()).toContain('<Code>AccessDenied</Code>');
      expect(res.body.includes(bytes)).toBe(false);
      expect(res.body.toString()).not.toContain('prj_A');
    }
    await expectUnchanged();
    await expect(store.get('projects/prj_A/new-object')).rejects.toMatchObject({ $metadata: { httpStatusCode: 404 } });
  });

  it('look-alikes of a signature get no further: lower-case query names, SigV2, forged SigV4 header and query', async () => {
    const credential = `${s3.accessKeyId}/${amzDate().slice(0, 8)}/us-east-1/s3/aws4_request`;
    const forgedQuery = new URLSearchParams({
      'X-Amz-Algorithm': 'AWS4-HMAC-SHA256',
      'X-Amz-Credential': credential,
      'X-Amz-Date': amzDate(),
      'X-Amz-Expires': '60',
      'X-Amz-SignedHeaders': 'host',
      'X-Amz-Signature': '0'.repeat(64),
    });
    const cases: [string, number, string, string, Record<string, string>][] = [
      // s3rver looks for `X-Amz-Algorithm` in that exact case; a lower-case one must not pass as "signed"
      ['lower-case presign names', 403, 'GET', `/${bucket}/${key}?x-amz-algorithm=AWS4-HMAC-SHA256&x-amz-signature=${'0'.repeat(64)}`, {}],
      ['SigV2 header', 403, 'GET', `/${bucket}/${key}`, { Authorization: `AWS ${s3.accessKeyId}:${'A'.repeat(28)}`, Date: new Date().toUTCString() }],
      ['SigV2 query', 403, 'GET', `/${bucket}/${key}?AWSAccessKeyId=${s3.accessKeyId}&Expires=9999999999&Signature=abc`, {}],
      ['forged SigV4 query', 403, 'GET', `/${bucket}/${key}?${forgedQuery.toString()}`, {}],
      ['forged SigV4 query, PUT', 403, 'PUT', `/${bucket}/${key}?${forgedQuery.toString()}`, {}],
      [
        'forged SigV4 header',
        403,
        'GET',
        `/${bucket}?list-type=2`,
        {
          Authorization: `AWS4-HMAC-SHA256 Credential=${credential}, SignedHeaders=host;x-amz-content-sha256;x-amz-date, Signature=${'0'.repeat(64)}`,
          'x-amz-date': amzDate(),
          'x-amz-content-sha256': 'UNSIGNED-PAYLOAD',
        },
      ],
    ];
    for (const [label, status, method, path, headers] of cases) {
      const res = await raw(method, path, { headers, ...(method === 'PUT' ? { body: 'forged' } : {}) });
      expect([label, res.status]).toEqual([label, status]);
      expect(res.body.includes(bytes)).toBe(false);
      expect(res.body.toString()).not.toContain('prj_A');
    }
    await expectUnchanged();
  });

  it("s3rver's well-known S3RVER/S3RVER key pair signs nothing: no read, list or write", async () => {
    const known = new ObjectStore({ ...options, accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' });
    try {
      await expect(known.get(key)).rejects.toMatchObject({ $metadata: { httpStatusCode: 403 } });
      await expect(known.put({ key, body: Buffer.from('replaced'), contentType: 'image/png' })).rejects.toMatchObject({ $metadata: { httpStatusCode: 403 } });
      await expect(known.delete(key)).rejects.toMatchObject({ $metadata: { httpStatusCode: 403 } });
      expect(await known.ping()).toBe(false);
      const url = await known.presignGet({ key, maxSeconds: 60, notAfter: farFuture(), contentType: 'image/png', fileName: 'a.png' });
      expect((await raw('GET', url!.url)).status).toBe(403);
    } finally {
      known.close();
    }
    await expectUnchanged();
  });
});

describe('signed requests', () => {
  it('the service key lists, reads and writes; a presigned GET serves the exact bytes, type and name, not cacheable', async () => {
    expect(await store.ping()).toBe(true);
    await store.put({ key: 'projects/prj_A/scratch', body: Buffer.from('scratch'), contentType: 'text/plain' });
    expect((await store.get('projects/prj_A/scratch')).toString()).toBe('scratch');
    await store.delete('projects/prj_A/scratch');

    const url = await presign();
    const res = await raw('GET', url);
    expect(res.status).toBe(200);
    expect(res.body.equals(bytes)).toBe(true);
    expect(res.headers.get('content-type')).toBe('image/png');
    expect(res.headers.get('content-disposition')).toBe('attachment; filename="a.png"');
    // s3rver applies the signed response-cache-control override itself
    expect(new URL(url).searchParams.get('response-cache-control')).toBe('private, no-store');
    expect(res.headers.get('cache-control')).toBe('private, no-store');
  });

  it('a tampered, stripped, re-aimed or expired presigned URL gets 403 and no bytes', async () => {
    const url = new URL(await presign());
    const variants: [string, string][] = [];
    const sig = url.searchParams.get('X-Amz-Signature')!;
    const edit = (label: string, change: (u: URL) => void) => {
      const u = new URL(url);
      change(u);
      variants.push([label, u.toString()]);
    };
    edit('signature changed', (u) => u.searchParams.set('X-Amz-Signature', sig.slice(0, -1) + (sig.endsWith('0') ? '1' : '0')));
    edit('another object', (u) => (u.pathname = `/${bucket}/${otherKey}`));
    edit('longer expiry', (u) => u.searchParams.set('X-Amz-Expires', '604800'));
    edit('cacheable', (u) => u.searchParams.set('response-cache-control', 'public, max-age=31536000'));
    edit('signature removed', (u) => u.searchParams.delete('X-Amz-Signature'));
    edit('all signing parameters removed', (u) => {
      for (const name of [...u.searchParams.keys()]) if (name.startsWith('X-Amz-')) u.searchParams.delete(name);
    });
    edit('query removed', (u) => (u.search = ''));
    const client = new S3Client({
      endpoint: s3.endpoint,
      region: 'us-east-1',
      forcePathStyle: true,
      credentials: { accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey },
    });
    try {
      const expired = await getSignedUrl(client, new GetObjectCommand({ Bucket: bucket, Key: key }), {
        expiresIn: 60,
        signingDate: new Date(Date.now() - 120_000),
      });
      variants.push(['expired', expired]);
    } finally {
      client.destroy();
    }
    for (const [label, u] of variants) {
      const res = await raw('GET', u);
      expect([label, res.status]).toEqual([label, 403]);
      expect(res.body.includes(bytes) || res.body.includes(otherBytes)).toBe(false);
    }
    // a presigned GET does not authorise a PUT to the same URL
    expect((await raw('PUT', url.toString(), { body: 'replaced' })).status).toBe(403);
    await expectUnchanged();
  });
});
