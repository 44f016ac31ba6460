import { randomUUID } from 'node:crypto';
import { bearer, useStack, waitForExecution } from '../stack';

/**
 * The download route's presigned URL through the whole stack: it never outlives the
 * artifact (issue #11), and the bytes it serves are marked not to be cached (issue #18).
 */
const stack = useStack();

async function artifact(secret: string): Promise<{ executionId: string; artifactId: string }> {
  const v = (await stack.http().get('/tools').set(bearer(secret))).body.data.priceVersion;
  const sub = await stack
    .http()
    .post('/tools/test.sleep')
    .set({ ...bearer(secret), 'Idempotency-Key': randomUUID() })
    .send({ tool: 'test.sleep', arguments: { seconds: 0, steps: 1, costMicrosPerStep: 1 }, priceVersion: v, maximumChargeMicros: 1 });
  expect(sub.status).toBe(202);
  const done = await waitForExecution(stack, secret, sub.body.data.id);
  expect(done.status).toBe('succeeded');
  return { executionId: done.id as string, artifactId: (done.output as { artifacts: { id: string }[] }).artifacts[0]!.id };
}

function download(secret: string, a: { executionId: string; artifactId: string }) {
  return stack.http().get(`/tools/executions/${a.executionId}/artifacts/${a.artifactId}/download`).set(bearer(secret));
}

/** The instant S3 stops honouring the URL: X-Amz-Date + X-Amz-Expires. */
function urlEnd(url: string): number {
  const q = new URL(url).searchParams;
  const d = q.get('X-Amz-Date')!;
  return (
    Date.UTC(+d.slice(0, 4), +d.slice(4, 6) - 1, +d.slice(6, 8), +d.slice(9, 11), +d.slice(11, 13), +d.slice(13, 15)) + Number(q.get('X-Amz-Expires')) * 1000
  );
}

it('an artifact with 30 days left gets a 300 s URL whose bytes come back with Cache-Control: private, no-store', async () => {
  const p = await stack.seed({ creditMicros: 10_000 });
  const a = await artifact(p.secret);
  const before = Date.now();
  const res = await download(p.secret, a);
  expect(res.status).toBe(200);
  const { url, expiresAt } = res.body.data as { url: string; expiresAt: string };
  expect(new URL(url).searchParams.get('X-Amz-Expires')).toBe('300');
  expect(Date.parse(expiresAt)).toBe(urlEnd(url));
  expect(Date.parse(expiresAt)).toBeGreaterThan(before + 298_000);

  const file = await fetch(url);
  expect(file.status).toBe(200);
  expect(file.headers.get('cache-control')).toBe('private, no-store');
  expect((await file.arrayBuffer()).byteLength).toBe(res.body.data.sizeBytes);
});

it('an artifact expiring in 10 s gets a URL that ends by then, and its expiresAt says so', async () => {
  const p = await stack.seed({ creditMicros: 10_000 });
  const a = await artifact(p.secret);
  const artifactEnd = new Date(Date.now() + 10_000);
  await stack.db('artifacts').where({ id: a.artifactId }).update({ expires_at: artifactEnd });

  const res = await download(p.secret, a);
  expect(res.status).toBe(200);
  const { url, expiresAt } = res.body.data as { url: string; expiresAt: string };
  const ttl = Number(new URL(url).searchParams.get('X-Amz-Expires'));
  expect(ttl).toBeLessThanOrEqual(10);
  expect(ttl).toBeGreaterThanOrEqual(7);
  expect(urlEnd(url)).toBeLessThanOrEqual(artifactEnd.getTime());
  expect(Date.parse(expiresAt)).toBe(urlEnd(url));
  expect((await fetch(url)).status).toBe(200); // still a live URL until then
});

it('an artifact with under a second left is already artifact_expired, not a sub-second URL', async () => {
  const p = await stack.seed({ creditMicros: 10_000 });
  const a = await artifact(p.secret);
  await stack
    .db('artifacts')
    .where({ id: a.artifactId })
    .update({ expires_at: new Date(Date.now() + 500) });
  const res = await download(p.secret, a);
  expect(res.status).toBe(404);
  expect(res.body.error).toEqual({ status: 'NOT_FOUND', message: 'artifact_expired' });
});
