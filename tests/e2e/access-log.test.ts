import { randomBytes } from 'node:crypto';
import { AUTH_FAILURES_PER_MINUTE } from '../../services/gateway/src/rate-limit';
import { bearer, useStack } from '../stack';

/**
 * The access log (issue #17): one `gateway.http.request` line per request, found by the request
 * id a caller quotes, with the route template, the caller's key and project, the status, the
 * duration, the bytes and the error code; never the key, the body or the query string. And the
 * metrics' route label: the template for every answered request, 401s, 429s and 405s included;
 * `unmatched` only for a path no route has.
 */
const LIMIT = 5;
const stack = useStack({ worker: false, relay: false, audit: false, env: { RATE_LIMIT_PER_MINUTE: String(LIMIT) } });

type Line = Record<string, unknown>;

/** The access-log lines of a request id (waits for the first: the line follows the answer). */
async function linesOf(requestId: string): Promise<Line[]> {
  const find = () => stack.logs.records.filter((r) => r.message === 'gateway.http.request' && r.requestId === requestId);
  for (let i = 0; i < 200 && find().length === 0; i++) await new Promise((r) => setTimeout(r, 25));
  return find();
}

/** The one formatted line (as the transport writes it) of a request id. */
function textOf(requestId: string): string {
  const lines = stack.logs.lines.filter((l) => l.includes('"gateway.http.request"') && l.includes(`"requestId":"${requestId}"`));
  expect(lines).toHaveLength(1);
  return lines[0]!;
}

const newId = (what: string) => `${what}-${randomBytes(8).toString('hex')}`;

async function scrape(): Promise<string> {
  const res = await fetch(`http://127.0.0.1:${stack.gatewayMetricsPort}/metrics`);
  return res.text();
}

/** The request count of one label set (method, route, status; any order, the service label aside). */
function count(text: string, labels: string): number {
  const want = [...labels.matchAll(/([a-z_]+)="([^"]*)"/g)]
    .map((m) => `${m[1]}=${m[2]}`)
    .sort()
    .join(',');
  for (const line of text.split('\n')) {
    const m = /^tes_http_request_duration_seconds_count\{(.*)\} (\S+)$/.exec(line);
    if (!m) continue;
    const got = [...m[1]!.matchAll(/([a-z_]+)="([^"]*)"/g)]
      .filter((x) => x[1] !== 'service')
      .map((x) => `${x[1]}=${x[2]}`)
      .sort()
      .join(',');
    if (got === want) return Number(m[2]);
  }
  return 0;
}

it('writes one line per request, found by the request id the caller sent, with the route template, key, project, status, time and bytes', async () => {
  const p = await stack.seed({ creditMicros: 1_000 });
  const version = (await stack.http().get('/tools').set(bearer(p.secret))).body.data.priceVersion as string;
  const sub = await stack
    .http()
    .post('/tools/test.sleep')
    .set({ ...bearer(p.secret), 'Idempotency-Key': newId('idem') })
    .send({ tool: 'test.sleep', arguments: { seconds: 0, steps: 1, costMicrosPerStep: 1 }, priceVersion: version, maximumChargeMicros: 1 });
  expect(sub.status).toBe(202);

  // a query string a careless log would echo, with a key in it
  const requestId = newId('poll');
  const res = await stack
    .http()
    .get(`/tools/executions/${sub.body.data.id}?sig=${p.secret}`)
    .set({ ...bearer(p.secret), 'X-Request-Id': requestId });
  expect(res.status).toBe(200);
  expect(res.headers['x-request-id']).toBe(requestId);

  const lines = await linesOf(requestId);
  expect(lines).toHaveLength(1);
  const line = lines[0]!;
  expect(line).toMatchObject({
    level: 'info',
    requestId,
    method: 'GET',
    route: '/tools/executions/{id}',
    status: 200,
    keyId: p.keyId,
    projectId: p.projectId,
  });
  expect(line.durationMs).toEqual(expect.any(Number));
  expect(line.durationMs as number).toBeGreaterThanOrEqual(0);
  // the bytes written for the answer: its headers and its body
  expect(line.bytesSent as number).toBeGreaterThan(Buffer.byteLength(res.text));
  expect(line.errorCode).toBeUndefined();
  const text = textOf(requestId);
  expect(text).not.toContain(p.secret);
  expect(text).not.toContain(p.secret.slice(-32));
  expect(text).not.toContain('sig=');
  expect(text).not.toContain(sub.body.data.id as string); // the raw path: only its template is logged

  // the submit's line, found by the id the answer carries (none was sent)
  const submitLines = await linesOf(sub.headers['x-request-id']!);
  expect(submitLines).toHaveLength(1);
  expect(submitLines[0]).toMatchObject({ method: 'POST', route: '/tools/{tool}', status: 202, keyId: p.keyId, projectId: p.projectId });
});

it('logs refusals with the error code, and a refused key appears nowhere', async () => {
  const p = await stack.seed();
  const missing = newId('missing');
  expect(
    (
      await stack
        .http()
        .get('/tools/executions/exe_01ARZ3NDEKTSV4RRFFQ69G5FAV')
        .set({ ...bearer(p.secret), 'X-Request-Id': missing })
    ).status,
  ).toBe(404);
  expect((await linesOf(missing))[0]).toMatchObject({ status: 404, route: '/tools/executions/{id}', errorCode: 'execution_not_found', keyId: p.keyId });

  const wrongKey = `tes_${randomBytes(4).toString('hex')}_${randomBytes(16).toString('hex')}`;
  const refused = newId('refused');
  const body = { tool: 'test.sleep', arguments: { note: `body-${wrongKey}` } };
  const r = await stack
    .http()
    .post('/tools/test.sleep')
    .set({ ...bearer(wrongKey), 'X-Request-Id': refused, 'Idempotency-Key': newId('idem') })
    .send(body);
  expect(r.status).toBe(401);
  const [line] = await linesOf(refused);
  expect(line).toMatchObject({ status: 401, route: '/tools/{tool}', errorCode: 'platform_api_key_invalid', method: 'POST' });
  expect(line!.keyId).toBeUndefined();
  expect(line!.projectId).toBeUndefined();
  const text = textOf(refused);
  expect(text).not.toContain(wrongKey);
  expect(text).not.toContain('body-');

  // a method the path does not take: its template, 405
  const put = newId('put');
  expect(
    (
      await stack
        .http()
        .put('/tools/quote')
        .set({ ...bearer(p.secret), 'X-Request-Id': put })
    ).status,
  ).toBe(405);
  expect((await linesOf(put))[0]).toMatchObject({ status: 405, route: '/tools/quote', errorCode: 'method_not_allowed' });

  // a path no route has
  const unknown = newId('unknown');
  expect(
    (
      await stack
        .http()
        .get('/tools/no/such/thing')
        .set({ ...bearer(p.secret), 'X-Request-Id': unknown })
    ).status,
  ).toBe(404);
  expect((await linesOf(unknown))[0]).toMatchObject({ status: 404, route: 'unmatched', errorCode: 'route_not_found' });
});

it("labels 401s and 429s with their route template, and only unknown paths as 'unmatched'", async () => {
  const before = await scrape();
  // past the per-key limit: 429 on GET /tools
  const p = await stack.seed();
  const statuses: number[] = [];
  for (let i = 0; i <= LIMIT; i++) statuses.push((await stack.http().get('/tools').set(bearer(p.secret))).status);
  expect(statuses).toEqual([...Array<number>(LIMIT).fill(200), 429]);
  // failed authentications from this address: 401s, then 429 (the failed-authentication throttle)
  const wrong = `tes_AAAAAAAA_${'D'.repeat(32)}`;
  const refused: number[] = [];
  for (let i = 0; i <= AUTH_FAILURES_PER_MINUTE; i++)
    refused.push((await stack.http().get('/tools/executions/exe_01ARZ3NDEKTSV4RRFFQ69G5FAV').set(bearer(wrong))).status);
  expect(refused.filter((s) => s === 429).length).toBeGreaterThanOrEqual(1);
  const unknown = await fetch(`${stack.baseUrl}/no-such-path`);
  expect(unknown.status).toBe(404);

  // the line follows the answer: wait for the last one before scraping
  await linesOf(unknown.headers.get('x-request-id')!);
  const after = await scrape();
  const grew = (labels: string) => count(after, labels) - count(before, labels);
  expect(grew('method="GET",route="/tools",status="200"')).toBe(LIMIT);
  expect(grew('method="GET",route="/tools",status="429"')).toBe(1);
  expect(grew('method="GET",route="/tools/executions/{id}",status="401"') + grew('method="GET",route="/tools/executions/{id}",status="429"')).toBe(
    AUTH_FAILURES_PER_MINUTE + 1,
  );
  expect(grew('method="GET",route="/tools/executions/{id}",status="429"')).toBeGreaterThanOrEqual(1);
  expect(grew('method="GET",route="unmatched",status="404"')).toBe(1);
  expect(after).not.toMatch(/route="unmatched",status="(401|429)"/);
});
