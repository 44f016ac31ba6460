import { bearer, projectBalance, startStack, type TestStack } from '../stack';

/**
 * Every rejected submit reserves nothing and creates no execution, checked against the
 * database (not just the response).
 */
let stack: TestStack;

beforeAll(async () => {
  // no worker: nothing may run, so the state the tests see is what the gateway wrote
  stack = await startStack({ worker: false });
});

afterAll(async () => {
  if (!stack) return;
  const audit = await stack.audit();
  await stack.stop();
  expect(audit.problems).toEqual([]);
});

const SLEEP = { seconds: 0, steps: 2, costMicrosPerStep: 500 };

async function currentVersion(secret: string): Promise<string> {
  const res = await stack.http().get('/tools').set(bearer(secret));
  expect(res.status).toBe(200);
  return res.body.data.priceVersion;
}

async function nothingChanged(projectId: string, availableBefore: number): Promise<void> {
  expect(await projectBalance(stack.db, projectId)).toEqual({ available: availableBefore, reserved: 0 });
  const executions = await stack.db('executions').count<{ n: string }[]>({ n: '*' }).where({ project_id: projectId });
  expect(Number(executions[0]!.n)).toBe(0);
  const outbox = await stack.db('outbox').count<{ n: string }[]>({ n: '*' }).where({ project_id: projectId });
  expect(Number(outbox[0]!.n)).toBe(0);
  const journal = await stack.db('ledger_entries').count<{ n: string }[]>({ n: '*' }).where({ project_id: projectId }).whereNot({ kind: 'credit' });
  expect(Number(journal[0]!.n)).toBe(0);
}

function submit(secret: string, body: unknown, key = `k-${Math.random().toString(36).slice(2, 12)}`, tool = 'test.sleep') {
  return stack
    .http()
    .post(`/tools/${tool}`)
    .set({ ...bearer(secret), 'Idempotency-Key': key })
    .send(body as object);
}

describe('rejected submits change nothing', () => {
  const cases: [string, (v: string) => unknown, number, string, string][] = [
    [
      'bad input',
      (v) => ({ tool: 'test.sleep', arguments: { ...SLEEP, steps: 21 }, priceVersion: v, maximumChargeMicros: 10_000 }),
      400,
      'INVALID_ARGUMENT',
      'invalid_arguments',
    ],
    [
      'unknown argument',
      (v) => ({ tool: 'test.sleep', arguments: { ...SLEEP, extra: 1 }, priceVersion: v, maximumChargeMicros: 10_000 }),
      400,
      'INVALID_ARGUMENT',
      'invalid_arguments',
    ],
    [
      'wrong price version',
      () => ({ tool: 'test.sleep', arguments: SLEEP, priceVersion: '1999-01-01.1', maximumChargeMicros: 10_000 }),
      400,
      'FAILED_PRECONDITION',
      'price_version_mismatch',
    ],
    [
      'insufficient maximum',
      (v) => ({ tool: 'test.sleep', arguments: SLEEP, priceVersion: v, maximumChargeMicros: 999 }),
      400,
      'FAILED_PRECONDITION',
      'maximum_charge_insufficient',
    ],
    [
      'body tool differs from path',
      (v) => ({ tool: 'image.render', arguments: SLEEP, priceVersion: v, maximumChargeMicros: 10_000 }),
      400,
      'INVALID_ARGUMENT',
      'tool_mismatch',
    ],
    ['missing field', (v) => ({ tool: 'test.sleep', arguments: SLEEP, priceVersion: v }), 400, 'INVALID_ARGUMENT', 'invalid_request'],
    [
      'float money',
      (v) => ({ tool: 'test.sleep', arguments: SLEEP, priceVersion: v, maximumChargeMicros: 1000.5 }),
      400,
      'INVALID_ARGUMENT',
      'invalid_request',
    ],
  ];

  it.each(cases)('%s', async (_name, body, http, status, message) => {
    const p = await stack.seed({ creditMicros: 50_000 });
    const v = await currentVersion(p.secret);
    const res = await submit(p.secret, body(v));
    expect(res.status).toBe(http);
    expect(res.headers['cache-control']).toBe('no-store');
    expect(res.body.error).toMatchObject({ status, message });
    await nothingChanged(p.projectId, 50_000);
  });

  it('insufficient balance: 429 without Retry-After, not retryable', async () => {
    const p = await stack.seed({ creditMicros: 999 });
    const res = await submit(p.secret, { tool: 'test.sleep', arguments: SLEEP, priceVersion: await currentVersion(p.secret), maximumChargeMicros: 1_000 });
    expect(res.status).toBe(429);
    expect(res.body.error).toMatchObject({ status: 'RESOURCE_EXHAUSTED', message: 'insufficient_balance', details: { retryable: false } });
    expect(res.headers['retry-after']).toBeUndefined();
    await nothingChanged(p.projectId, 999);
  });

  it('monthly cap: 429 monthly_cap_exceeded', async () => {
    const p = await stack.seed({ creditMicros: 50_000, monthlyCapMicros: 999 });
    const res = await submit(p.secret, { tool: 'test.sleep', arguments: SLEEP, priceVersion: await currentVersion(p.secret), maximumChargeMicros: 1_000 });
    expect(res.status).toBe(429);
    expect(res.body.error).toMatchObject({ message: 'monthly_cap_exceeded', details: { retryable: false } });
    await nothingChanged(p.projectId, 50_000);
  });

  it('missing and malformed idempotency keys', async () => {
    const p = await stack.seed({ creditMicros: 50_000 });
    const body = { tool: 'test.sleep', arguments: SLEEP, priceVersion: await currentVersion(p.secret), maximumChargeMicros: 1_000 };
    const missing = await stack.http().post('/tools/test.sleep').set(bearer(p.secret)).send(body);
    expect(missing.status).toBe(400);
    expect(missing.body.error.message).toBe('idempotency_key_required');
    for (const key of ['short', 'x'.repeat(129), 'has space!', 'bad/slash']) {
      const res = await submit(p.secret, body, key);
      expect(res.status).toBe(400);
      expect(res.body.error.message).toBe('idempotency_key_invalid');
    }
    await nothingChanged(p.projectId, 50_000);
  });

  it('unknown tool in the path: 404 tool_not_found', async () => {
    const p = await stack.seed({ creditMicros: 50_000 });
    const res = await submit(p.secret, { tool: 'nope.tool', arguments: {}, priceVersion: 'x', maximumChargeMicros: 1 }, undefined, 'nope.tool');
    expect(res.status).toBe(404);
    expect(res.body.error).toEqual({ status: 'NOT_FOUND', message: 'tool_not_found', details: { tool: 'nope.tool' } });
    await nothingChanged(p.projectId, 50_000);
  });

  it('a key without tools:execute gets 403 with the required scope', async () => {
    const p = await stack.seed({ creditMicros: 50_000, scopes: ['tools:read'] });
    const res = await submit(p.secret, { tool: 'test.sleep', arguments: SLEEP, priceVersion: await currentVersion(p.secret), maximumChargeMicros: 1_000 });
    expect(res.status).toBe(403);
    expect(res.body.error).toEqual({ status: 'PERMISSION_DENIED', message: 'platform_api_key_scope_required', details: { requiredScope: 'tools:execute' } });
    await nothingChanged(p.projectId, 50_000);
  });

  it('execution disabled: 503, quotes still work, nothing reserved', async () => {
    const p = await stack.seed({ creditMicros: 50_000 });
    const v = await currentVersion(p.secret);
    await stack.db('settings').where({ key: 'execution_enabled' }).update({ value: 'false' });
    try {
      const catalog = await stack.http().get('/tools').set(bearer(p.secret));
      expect(catalog.body.data.executionEnabled).toBe(false);
      const quote = await stack.http().post('/tools/quote').set(bearer(p.secret)).send({ tool: 'test.sleep', arguments: SLEEP });
      expect(quote.status).toBe(200);
      const res = await submit(p.secret, { tool: 'test.sleep', arguments: SLEEP, priceVersion: v, maximumChargeMicros: 1_000 });
      expect(res.status).toBe(503);
      expect(res.body.error).toMatchObject({ status: 'UNAVAILABLE', message: 'execution_disabled' });
      await nothingChanged(p.projectId, 50_000);
    } finally {
      await stack.db('settings').where({ key: 'execution_enabled' }).update({ value: 'true' });
    }
  });
});
