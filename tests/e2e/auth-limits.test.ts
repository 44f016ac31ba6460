import { addKey } from '@tes/testing';
import { revokeApiKey } from '@tes/db';
import { bearer, startStack, type TestStack } from '../stack';

let stack: TestStack;

beforeAll(async () => {
  stack = await startStack({ worker: false });
});

afterAll(async () => {
  await stack?.stop();
});

function expectEnvelope(
  res: { status: number; headers: Record<string, string>; body: { error?: { status: string; message: string } } },
  http: number,
  status: string,
  message: string,
) {
  expect(res.status).toBe(http);
  expect(res.headers['cache-control']).toBe('no-store');
  expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
  expect(res.headers['x-request-id']).toBeTruthy();
  expect(res.body.error).toMatchObject({ status, message });
}

describe('authentication', () => {
  it('missing, malformed, unknown, revoked and expired keys get 401 with their code', async () => {
    const p = await stack.seed();
    expectEnvelope(await stack.http().get('/tools'), 401, 'UNAUTHENTICATED', 'platform_api_key_missing');
    expectEnvelope(await stack.http().get('/tools').set('Authorization', 'Basic abc'), 401, 'UNAUTHENTICATED', 'platform_api_key_invalid');
    expectEnvelope(
      await stack
        .http()
        .get('/tools')
        .set(bearer('tes_AAAAAAAA_' + 'B'.repeat(32))),
      401,
      'UNAUTHENTICATED',
      'platform_api_key_invalid',
    );
    // right lookup id, wrong secret part
    const forged = p.secret.slice(0, 13) + 'x'.repeat(32);
    expectEnvelope(await stack.http().get('/tools').set(bearer(forged)), 401, 'UNAUTHENTICATED', 'platform_api_key_invalid');

    const expired = await addKey(stack.db, p.projectId, { expiresAt: new Date(Date.now() - 1000) });
    expectEnvelope(await stack.http().get('/tools').set(bearer(expired.secret)), 401, 'UNAUTHENTICATED', 'platform_api_key_expired');
    const revoked = await addKey(stack.db, p.projectId);
    expect((await stack.http().get('/tools').set(bearer(revoked.secret))).status).toBe(200);
    await revokeApiKey(stack.db, revoked.id);
    const revokedAt = Date.now();
    // gateways may use a cached key row for AUTH_CACHE_TTL_MS (300 ms here, 5 s at most)
    let res = await stack.http().get('/tools').set(bearer(revoked.secret));
    while (res.status === 200 && Date.now() - revokedAt < 2_000) {
      await new Promise((r) => setTimeout(r, 50));
      res = await stack.http().get('/tools').set(bearer(revoked.secret));
    }
    expectEnvelope(res, 401, 'UNAUTHENTICATED', 'platform_api_key_revoked');
    expect(Date.now() - revokedAt).toBeLessThan(300 + 500);
  });

  it('each endpoint requires its scope', async () => {
    const p = await stack.seed({ scopes: ['executions:read'] });
    const cases: [string, string, string][] = [
      ['get', '/tools/project', 'project:read'],
      ['get', '/tools/usage', 'usage:read'],
      ['get', '/tools', 'tools:read'],
      ['get', '/tools/image.render', 'tools:read'],
      ['post', '/tools/quote', 'tools:read'],
      ['post', '/tools/upload', 'tools:execute'],
      ['post', '/tools/test.sleep', 'tools:execute'],
    ];
    for (const [method, path, scope] of cases) {
      const req = method === 'get' ? stack.http().get(path) : stack.http().post(path).send({});
      const res = await req.set(bearer(p.secret));
      expectEnvelope(res, 403, 'PERMISSION_DENIED', 'platform_api_key_scope_required');
      expect(res.body.error.details).toEqual({ requiredScope: scope });
    }
  });

  it("another project's execution and artifact ids are 404, identical to unknown ids", async () => {
    const a = await stack.seed({ creditMicros: 10_000 });
    const b = await stack.seed();
    const v = (await stack.http().get('/tools').set(bearer(a.secret))).body.data.priceVersion;
    const sub = await stack
      .http()
      .post('/tools/test.sleep')
      .set({ ...bearer(a.secret), 'Idempotency-Key': 'bola-check-1' })
      .send({ tool: 'test.sleep', arguments: { seconds: 0, steps: 1, costMicrosPerStep: 1 }, priceVersion: v, maximumChargeMicros: 1 });
    const id = sub.body.data.id as string;
    const unknown = 'exe_01ARZ3NDEKTSV4RRFFQ69G5FAV';
    for (const path of [`/tools/executions/${id}`, `/tools/executions/${id}/artifacts/art_01ARZ3NDEKTSV4RRFFQ69G5FAV/download`]) {
      const theirs = await stack.http().get(path).set(bearer(b.secret));
      const none = await stack.http().get(path.replace(id, unknown)).set(bearer(b.secret));
      expect(theirs.status).toBe(404);
      expect(theirs.body).toEqual(none.body);
    }
    const cancel = await stack.http().post(`/tools/executions/${id}/cancel`).set(bearer(b.secret));
    expect(cancel.status).toBe(404);
    expect(cancel.body.error.message).toBe('execution_not_found');
    const list = await stack.http().get('/tools/executions').set(bearer(b.secret));
    expect(list.body.data).toEqual([]);
  });
});

describe('request-rate limit', () => {
  it('121 requests in a window: exactly the 121st is refused; another key is unaffected; the window resets', async () => {
    const p = await stack.seed();
    const other = await addKey(stack.db, p.projectId);
    const statuses: number[] = [];
    for (let i = 0; i < 121; i++) {
      const res = await stack.http().get('/tools/project').set(bearer(p.secret));
      statuses.push(res.status);
      if (i === 0) {
        expect(res.headers['ratelimit-limit']).toBe('120');
        expect(res.headers['ratelimit-remaining']).toBe('119');
        expect(res.headers['ratelimit-policy']).toBe('120;w=60');
        expect(Number(res.headers['ratelimit-reset'])).toBeLessThanOrEqual(60);
      }
      if (i === 120) {
        expectEnvelope(res, 429, 'RESOURCE_EXHAUSTED', 'rate_limit_exceeded');
        expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
        expect(res.headers['ratelimit-remaining']).toBe('0');
      }
    }
    expect(statuses.filter((s) => s === 429)).toEqual([429]);
    expect(statuses.indexOf(429)).toBe(120);
    expect((await stack.http().get('/tools/project').set(bearer(other.secret))).status).toBe(200);
    // the window ends (moved into the past rather than waited for): the key may call again
    // once the gateway re-checks the exhausted key against the shared counter (≤ 1 s)
    await stack
      .db('rate_limits')
      .where('key', `key:${p.keyId}`)
      .update({ expire: Date.now() - 1 });
    const refusedUntil = Date.now() + 5_000;
    let after = await stack.http().get('/tools/project').set(bearer(p.secret));
    while (after.status === 429 && Date.now() < refusedUntil) {
      await new Promise((r) => setTimeout(r, 100));
      after = await stack.http().get('/tools/project').set(bearer(p.secret));
    }
    expect(after.status).toBe(200);
    expect(after.headers['ratelimit-remaining']).toBe('119');
  });

  it('repeated failed authentication from one address is slowed down', async () => {
    // a stack of its own: the failure count is per address, and other tests here fail auth too
    const own = await startStack({ worker: false, relay: false });
    try {
      const p = await own.seed();
      const statuses: number[] = [];
      for (let i = 0; i < 35; i++)
        statuses.push(
          (
            await own
              .http()
              .get('/tools')
              .set(bearer('tes_AAAAAAAA_' + 'C'.repeat(32)))
          ).status,
        );
      expect(statuses.slice(0, 30).every((s) => s === 401)).toBe(true);
      expect(statuses.slice(30).every((s) => s === 429)).toBe(true);
      const res = await own
        .http()
        .get('/tools')
        .set(bearer('tes_AAAAAAAA_' + 'C'.repeat(32)));
      expectEnvelope(res, 429, 'RESOURCE_EXHAUSTED', 'rate_limit_exceeded');
      expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
      // the guessing is slowed, not the address: a valid key from it is still served
      expect((await own.http().get('/tools').set(bearer(p.secret))).status).toBe(200);
    } finally {
      await own.stop();
    }
  });
});
