import { ObjectStore } from '../src';

/**
 * presignGet's arithmetic, without a server (presigning is local): the URL's own end of
 * life, X-Amz-Date + X-Amz-Expires as S3 computes it, never passes `notAfter` nor `maxSeconds`.
 */
const store = new ObjectStore({
  endpoint: 'http://127.0.0.1:9',
  publicEndpoint: 'https://files.example.test',
  bucket: 'tes-artifacts',
  region: 'us-east-1',
  accessKeyId: 'AKIDEXAMPLE',
  secretAccessKey: 'wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY',
});
afterAll(() => store.close());

const base = { key: 'projects/prj_1/executions/exe_1/art_1.png', contentType: 'image/png', fileName: 'out put.png' };

/** The instant S3 stops honouring the URL, from what it carries. */
function urlEnd(url: string): number {
  const q = new URL(url).searchParams;
  const d = q.get('X-Amz-Date')!;
  const signedAt = Date.UTC(+d.slice(0, 4), +d.slice(4, 6) - 1, +d.slice(6, 8), +d.slice(9, 11), +d.slice(11, 13), +d.slice(13, 15));
  return signedAt + Number(q.get('X-Amz-Expires')) * 1000;
}

it('a far-off notAfter leaves maxSeconds in charge', async () => {
  const before = Date.now();
  const p = (await store.presignGet({ ...base, maxSeconds: 300, notAfter: new Date(Date.now() + 30 * 86_400_000) }))!;
  expect(p.ttlSeconds).toBe(300);
  expect(new URL(p.url).searchParams.get('X-Amz-Expires')).toBe('300');
  expect(urlEnd(p.url)).toBe(p.expiresAt.getTime());
  expect(p.expiresAt.getTime()).toBeGreaterThan(before + 299_000);
  expect(p.expiresAt.getTime()).toBeLessThanOrEqual(Date.now() + 300_000);
  expect(p.url.startsWith('https://files.example.test/tes-artifacts/projects/prj_1/')).toBe(true);
});

it('a URL ends no later than notAfter: 10 s left gives at most 10 s, to the second S3 counts from', async () => {
  for (const leftMs of [10_000, 10_999, 9_001, 1_500]) {
    const notAfter = new Date(Date.now() + leftMs);
    const p = (await store.presignGet({ ...base, maxSeconds: 300, notAfter }))!;
    expect(p.ttlSeconds).toBeLessThanOrEqual(Math.ceil(leftMs / 1000));
    expect(p.ttlSeconds).toBeGreaterThanOrEqual(Math.floor(leftMs / 1000) - 1);
    expect(Number(new URL(p.url).searchParams.get('X-Amz-Expires'))).toBe(p.ttlSeconds);
    expect(urlEnd(p.url)).toBe(p.expiresAt.getTime());
    expect(p.expiresAt.getTime()).toBeLessThanOrEqual(notAfter.getTime());
  }
});

it('less than a second before notAfter (or after it) there is no URL', async () => {
  expect(await store.presignGet({ ...base, maxSeconds: 300, notAfter: new Date(Date.now() + 200) })).toBeNull();
  expect(await store.presignGet({ ...base, maxSeconds: 300, notAfter: new Date(Date.now() - 5_000) })).toBeNull();
});

it('the signed URL asks for no caching, the exact type and an attachment with a safe name', async () => {
  const p = (await store.presignGet({ ...base, maxSeconds: 60, notAfter: new Date(Date.now() + 86_400_000) }))!;
  const q = new URL(p.url).searchParams;
  expect(q.get('response-cache-control')).toBe('private, no-store');
  expect(q.get('response-content-type')).toBe('image/png');
  expect(q.get('response-content-disposition')).toBe('attachment; filename="out_put.png"');
  expect(q.get('X-Amz-SignedHeaders')).toBe('host');
});
