import { createHash } from 'node:crypto';
import { bearer, projectBalance, waitForExecution, useStack } from '../stack';

const stack = useStack();

async function quote(secret: string, tool: string, args: Record<string, unknown>) {
  const res = await stack.http().post('/tools/quote').set(bearer(secret)).send({ tool, arguments: args });
  expect(res.status).toBe(200);
  return res.body.data as { priceVersion: string; maximumChargeMicros: number; minimumChargeMicros: number; model: string };
}

describe('the paid execution path, end to end', () => {
  it('quotes, reserves, runs image.render, settles and serves the bytes through a presigned URL', async () => {
    const p = await stack.seed({ creditMicros: 1_000_000 });
    const args = { text: 'Hello, world', width: 1200, height: 900, format: 'png' };
    const q = await quote(p.secret, 'image.render', args);
    expect(q.maximumChargeMicros).toBe(2_000); // 1.08 MP -> 2 started megapixels at $0.001
    expect(q.model).toBe('sharp');

    const submit = await stack
      .http()
      .post('/tools/image.render')
      .set({ ...bearer(p.secret), 'Idempotency-Key': 'render-0001' })
      .send({ tool: 'image.render', arguments: args, priceVersion: q.priceVersion, maximumChargeMicros: q.maximumChargeMicros });
    expect(submit.status).toBe(202);
    expect(submit.headers['retry-after']).toBe('5');
    expect(submit.headers['cache-control']).toBe('no-store');
    const id = submit.body.data.id as string;
    expect(id).toMatch(/^exe_[0-9A-Z]{26}$/);
    expect(submit.headers.location).toBe(`/tools/executions/${id}`);
    expect(submit.body.data.reservedMicros).toBe(2_000);
    // the reservation is held while the execution is open
    const during = await projectBalance(stack.db, p.projectId);
    expect(during.available + during.reserved).toBe(1_000_000);

    const done = await waitForExecution(stack, p.secret, id);
    expect(done.status).toBe('succeeded');
    expect(done.chargedMicros).toBe(2_000);
    expect(done.progress).toEqual({ completedSteps: 1, totalSteps: 1, currentStep: null });
    const artifacts = (done.output as { artifacts: { id: string; sha256: string; mimeType: string; sizeBytes: number }[]; width: number }).artifacts;
    expect(artifacts).toHaveLength(1);
    expect((done.output as { width: number }).width).toBe(1200);
    const art = artifacts[0]!;
    expect(art.id).toMatch(/^art_/);
    expect(JSON.stringify(done)).not.toMatch(/https?:\/\//);

    const dl = await stack.http().get(`/tools/executions/${id}/artifacts/${art.id}/download`).set(bearer(p.secret));
    expect(dl.status).toBe(200);
    expect(dl.body.data.mimeType).toBe('image/png');
    const url = dl.body.data.url as string;
    expect(url).not.toContain(p.secret);
    expect(Date.parse(dl.body.data.expiresAt) - Date.now()).toBeLessThanOrEqual(300_000);

    // fetched with no API key at all
    const file = await fetch(url);
    expect(file.status).toBe(200);
    expect(file.headers.get('content-type')).toBe('image/png');
    expect(file.headers.get('content-disposition')).toBe(`attachment; filename="${id}-0.png"`);
    const bytes = Buffer.from(await file.arrayBuffer());
    expect(bytes.length).toBe(art.sizeBytes);
    expect(createHash('sha256').update(bytes).digest('hex')).toBe(art.sha256);
    expect(bytes.subarray(1, 4).toString('latin1')).toBe('PNG');

    // a tampered URL is refused by the signature-checking store
    const tampered = await fetch(url.replace(/X-Amz-Signature=([0-9a-f])/, (_m, c: string) => `X-Amz-Signature=${c === '0' ? '1' : '0'}`));
    expect(tampered.status).toBe(403);

    const after = await projectBalance(stack.db, p.projectId);
    expect(after).toEqual({ available: 1_000_000 - 2_000, reserved: 0 });
  });

  it('charges test.sleep per step and leaves nothing reserved', async () => {
    const p = await stack.seed({ creditMicros: 100_000 });
    const args = { seconds: 0, steps: 3, costMicrosPerStep: 700 };
    const q = await quote(p.secret, 'test.sleep', args);
    expect(q.maximumChargeMicros).toBe(2_100);
    const submit = await stack
      .http()
      .post('/tools/test.sleep')
      .set({ ...bearer(p.secret), 'Idempotency-Key': 'sleep-0001' })
      .send({ tool: 'test.sleep', arguments: args, priceVersion: q.priceVersion, maximumChargeMicros: 5_000 });
    expect(submit.status).toBe(202);
    // the reservation is the quote's maximum, not the caller's bound
    expect(submit.body.data.reservedMicros).toBe(2_100);
    const done = await waitForExecution(stack, p.secret, submit.body.data.id);
    expect(done.status).toBe('succeeded');
    expect(done.chargedMicros).toBe(2_100);
    expect((done.steps as { costMicros: number }[]).map((s) => s.costMicros)).toEqual([700, 700, 700]);
    expect(await projectBalance(stack.db, p.projectId)).toEqual({ available: 100_000 - 2_100, reserved: 0 });
  });
});
