import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { InsufficientBalanceError, MonthlyCapExceededError, RateLimitedError, ServiceUnavailableError, TesClient, TesNetworkError } from '../src';
import { untyped } from './fake-api';

/**
 * The retry policy at the HTTP level, against a scripted HTTP server: the answers the real
 * gateway cannot be made to give on demand (a dropped connection, a 503, a rate-limit 429
 * with a short Retry-After). The end-to-end files cover the real stack.
 */
type Step = (req: IncomingMessage, res: ServerResponse) => void;
interface Received {
  method: string;
  url: string;
  authorization: string | undefined;
  idempotencyKey: string | undefined;
  body: string;
}

let server: Server;
let script: Step[] = [];
let received: Received[] = [];
const KEY = 'tes_abcdefgh_0123456789abcdefghijABCDEFGHIJ';

const json =
  (status: number, body: unknown, headers: Record<string, string> = {}): Step =>
  (_req, res) => {
    res.writeHead(status, { 'Content-Type': 'application/json; charset=utf-8', 'X-Request-Id': `req-${received.length}`, ...headers });
    res.end(JSON.stringify(body));
  };
const error = (status: number, errorStatus: string, message: string, headers: Record<string, string> = {}): Step =>
  json(status, { error: { status: errorStatus, message } }, headers);
const drop: Step = (req) => req.socket.destroy();
const EXECUTION = { id: 'exe_01JD3Z8X4V6W2Q9R7T5Y1M3N8K', status: 'queued' };

beforeAll(async () => {
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      received.push({
        method: req.method ?? '',
        url: req.url ?? '',
        authorization: req.headers.authorization,
        idempotencyKey: req.headers['idempotency-key'] as string | undefined,
        body: Buffer.concat(chunks).toString('utf8'),
      });
      const step = script.shift() ?? error(500, 'INTERNAL', 'internal_error');
      step(req, res);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

beforeEach(() => {
  script = [];
  received = [];
});

function client(retry: Record<string, number> = {}): TesClient {
  const { port } = server.address() as AddressInfo;
  return new TesClient({ apiKey: KEY, baseUrl: `http://127.0.0.1:${port}/`, retry: { baseDelayMs: 10, maxDelayMs: 20, ...retry } });
}
const submitOptions = { priceVersion: 'v1', maximumChargeMicros: 10, idempotencyKey: 'transport-0001' };

describe('resends', () => {
  it('a dropped connection and two 503s: the submit is resent with the same key and bytes until it is answered', async () => {
    script = [
      drop,
      error(503, 'UNAVAILABLE', 'service_unavailable'),
      error(502, 'UNAVAILABLE', 'service_unavailable'),
      json(202, { data: EXECUTION }, { 'Retry-After': '5' }),
    ];
    const result = await client().submit(untyped('test.sleep'), { steps: 2 }, submitOptions);
    expect(result).toEqual({ execution: EXECUTION, replayed: false, retryAfterSeconds: 5, preferenceApplied: false });
    expect(received).toHaveLength(4);
    expect(new Set(received.map((r) => r.idempotencyKey))).toEqual(new Set(['transport-0001']));
    expect(new Set(received.map((r) => r.body)).size).toBe(1);
    expect(received.every((r) => r.authorization === `Bearer ${KEY}` && !r.url.includes(KEY))).toBe(true);
  });

  it('gives up after maxAttempts with a network error that names no key', async () => {
    script = [drop, drop, drop];
    const err = await client({ maxAttempts: 3 })
      .tools()
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TesNetworkError);
    expect(received).toHaveLength(3);
    expect((err as Error).message).not.toContain(KEY);
  });

  it('a 5xx after the last attempt is thrown as its typed error', async () => {
    script = [error(503, 'UNAVAILABLE', 'service_unavailable'), error(503, 'UNAVAILABLE', 'service_unavailable')];
    await expect(client({ maxAttempts: 2 }).usage()).rejects.toBeInstanceOf(ServiceUnavailableError);
    expect(received).toHaveLength(2);
  });

  it('execution_disabled is not resent', async () => {
    script = [error(503, 'UNAVAILABLE', 'execution_disabled')];
    await expect(client().submit(untyped('test.sleep'), {}, submitOptions)).rejects.toMatchObject({ code: 'execution_disabled' });
    expect(received).toHaveLength(1);
  });
});

describe('429', () => {
  it('the money 429s are thrown after one send', async () => {
    script = [error(429, 'RESOURCE_EXHAUSTED', 'insufficient_balance')];
    await expect(client().submit(untyped('test.sleep'), {}, submitOptions)).rejects.toBeInstanceOf(InsufficientBalanceError);
    script = [error(429, 'RESOURCE_EXHAUSTED', 'monthly_cap_exceeded')];
    await expect(client().submit(untyped('test.sleep'), {}, submitOptions)).rejects.toBeInstanceOf(MonthlyCapExceededError);
    expect(received).toHaveLength(2);
  });

  it('rate_limit_exceeded is waited out for its Retry-After, then resent with the same key', async () => {
    script = [
      error(429, 'RESOURCE_EXHAUSTED', 'rate_limit_exceeded', { 'Retry-After': '1' }),
      json(202, { data: EXECUTION }, { 'Idempotent-Replayed': 'true' }),
    ];
    const started = Date.now();
    const result = await client().submit(untyped('test.sleep'), {}, submitOptions);
    expect(Date.now() - started).toBeGreaterThanOrEqual(950);
    expect(result.replayed).toBe(true);
    expect(received.map((r) => r.idempotencyKey)).toEqual(['transport-0001', 'transport-0001']);
  });

  it('is thrown when the Retry-After is longer than allowed or the waits are used up', async () => {
    script = [error(429, 'RESOURCE_EXHAUSTED', 'rate_limit_exceeded', { 'Retry-After': '120' })];
    const err = await client()
      .tools()
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RateLimitedError);
    expect((err as RateLimitedError).retryAfterSeconds).toBe(120);
    expect(received).toHaveLength(1);
    received = [];
    script = [0, 0, 0].map(() => error(429, 'RESOURCE_EXHAUSTED', 'rate_limit_exceeded', { 'Retry-After': '0' }));
    await expect(client({ rateLimitRetries: 2 }).tools()).rejects.toBeInstanceOf(RateLimitedError);
    expect(received).toHaveLength(3);
  });
});

describe('run', () => {
  it("strategy 'poll' polls no faster than the 202 Retry-After asks, even with a short pollIntervalMs", async () => {
    const quote = {
      tool: 'test.sleep',
      model: 'sleep',
      priceVersion: 'v1',
      currency: 'usd',
      minimumChargeMicros: 0,
      maximumChargeMicros: 10,
      unit: 'step',
      estimatedUnits: 2,
    };
    const done = { ...EXECUTION, status: 'succeeded', output: { artifacts: [] } };
    script = [json(200, { data: quote }), json(202, { data: EXECUTION }, { 'Retry-After': '1' }), json(200, { data: done })];
    const c = new TesClient({ apiKey: KEY, baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, pollIntervalMs: 10 });
    const started = Date.now();
    const result = await c.run(untyped('test.sleep'), { steps: 2 }, { strategy: 'poll' });
    expect(Date.now() - started).toBeGreaterThanOrEqual(950);
    expect(result.execution.status).toBe('succeeded');
    expect(received.map((r) => `${r.method} ${r.url}`)).toEqual(['POST /tools/quote', 'POST /tools/test.sleep', `GET /tools/executions/${EXECUTION.id}`]);
    expect(JSON.parse(received[1]!.body)).toEqual({ tool: 'test.sleep', arguments: { steps: 2 }, priceVersion: 'v1', maximumChargeMicros: 10 });
  });
});
