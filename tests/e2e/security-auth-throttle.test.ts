import http from 'node:http';
import { ConfigError, loadConfig } from '@tes/config';
import { AUTH_FAILURES_PER_MINUTE } from '../../services/gateway/src/rate-limit';
import { bearer, useStack, type TestStack } from '../stack';

/**
 * The failed-authentication throttle and the order of the checks, over real sockets: each
 * client binds its own loopback address (Linux answers on all of 127.0.0.0/8), so the
 * gateway sees distinct client addresses without a proxy in front of it.
 */
const stack = useStack({ worker: false, relay: false, audit: false });
// TRUST_PROXY=loopback: the gateway sits behind a proxy on loopback; a low per-key limit
// makes "the limit is checked before the body" quick to reach.
const proxied = useStack({ worker: false, relay: false, audit: false, env: { TRUST_PROXY: 'loopback', RATE_LIMIT_PER_MINUTE: '5' } });

const WRONG = `tes_AAAAAAAA_${'C'.repeat(32)}`;

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  text: string;
  body: { error?: { status: string; message: string; details?: Record<string, unknown> }; data?: unknown } | undefined;
}

/** One request on a fresh connection from `from` (a loopback address). */
function call(s: TestStack, from: string, o: { method?: string; path?: string; headers?: Record<string, string>; body?: string }): Promise<Answer> {
  const port = Number(new URL(s.baseUrl).port);
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: '127.0.0.1', port, localAddress: from, agent: false, method: o.method ?? 'GET', path: o.path ?? '/tools/project', headers: o.headers },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let body: Answer['body'];
          try {
            body = JSON.parse(text) as Answer['body'];
          } catch {
            body = undefined;
          }
          resolve({ status: res.statusCode ?? 0, headers: res.headers, text, body });
        });
      },
    );
    req.on('error', reject);
    req.end(o.body);
  });
}

function expectError(a: Answer, status: number, message: string): void {
  expect({ status: a.status, message: a.body?.error?.message }).toEqual({ status, message });
  expect(a.headers['cache-control']).toBe('no-store');
  expect(a.headers['content-type']).toBe('application/json; charset=utf-8');
  expect(a.headers['x-request-id']).toBeTruthy();
}

/** Fails authentication AUTH_FAILURES_PER_MINUTE times from `from`, each answered 401. */
async function exhaust(s: TestStack, from: string, headers: Record<string, string> = {}): Promise<void> {
  const statuses: number[] = [];
  for (let i = 0; i < AUTH_FAILURES_PER_MINUTE; i++) statuses.push((await call(s, from, { headers: { ...bearer(WRONG), ...headers } })).status);
  expect(statuses).toEqual(statuses.map(() => 401));
}

describe('the failed-authentication throttle slows guessing, never a valid key', () => {
  it('after 30 failures from an address its guesses get 429, while a valid key from that address still gets 200', async () => {
    const p = await stack.seed();
    const guesser = '127.0.18.2';
    await exhaust(stack, guesser);

    const refused = await call(stack, guesser, { headers: bearer(WRONG) });
    expectError(refused, 429, 'rate_limit_exceeded');
    expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
    expectError(await call(stack, guesser, {}), 429, 'rate_limit_exceeded');
    // a right lookup id with a wrong secret is a guess too
    expectError(await call(stack, guesser, { headers: bearer(p.secret.slice(0, 13) + 'x'.repeat(32)) }), 429, 'rate_limit_exceeded');

    for (let i = 0; i < 3; i++) {
      const ok = await call(stack, guesser, { headers: bearer(p.secret) });
      expect(ok.status).toBe(200);
      expect(ok.headers['ratelimit-limit']).toBe('120');
    }
    // a success does not wipe the address's failures: guessing stays throttled
    expectError(await call(stack, guesser, { headers: bearer(WRONG) }), 429, 'rate_limit_exceeded');
    // and another address is not affected at all
    expectError(await call(stack, '127.0.18.3', { headers: bearer(WRONG) }), 401, 'platform_api_key_invalid');
    expect((await call(stack, '127.0.18.3', { headers: bearer(p.secret) })).status).toBe(200);
  });

  it('without TRUST_PROXY, X-Forwarded-For is ignored: a new forwarded address per guess does not reset the count', async () => {
    const from = '127.0.18.4';
    for (let i = 0; i < AUTH_FAILURES_PER_MINUTE; i++) {
      expect((await call(stack, from, { headers: { ...bearer(WRONG), 'X-Forwarded-For': `203.0.113.${i + 1}` } })).status).toBe(401);
    }
    expectError(await call(stack, from, { headers: { ...bearer(WRONG), 'X-Forwarded-For': '198.51.100.77' } }), 429, 'rate_limit_exceeded');
  });

  it('with TRUST_PROXY, the client address is the one the trusted proxy forwarded, and a prepended one is not believed', async () => {
    const p = await proxied.seed();
    const proxy = '127.0.19.1';
    const client = '203.0.113.7';
    await exhaust(proxied, proxy, { 'X-Forwarded-For': client });
    expectError(await call(proxied, proxy, { headers: { ...bearer(WRONG), 'X-Forwarded-For': client } }), 429, 'rate_limit_exceeded');
    // the proxy appends what it saw; whatever the client wrote before that is not trusted
    expectError(await call(proxied, proxy, { headers: { ...bearer(WRONG), 'X-Forwarded-For': `198.51.100.9, ${client}` } }), 429, 'rate_limit_exceeded');
    // other clients behind the same proxy are not locked out by this one's guessing
    expectError(await call(proxied, proxy, { headers: { ...bearer(WRONG), 'X-Forwarded-For': '203.0.113.8' } }), 401, 'platform_api_key_invalid');
    expect((await call(proxied, proxy, { headers: { ...bearer(p.secret), 'X-Forwarded-For': client } })).status).toBe(200);
  });

  it('TRUST_PROXY is off by default and takes a hop count or proxy addresses, never "true"', () => {
    expect(loadConfig({}).trustProxy).toBe(false);
    expect(loadConfig({ TRUST_PROXY: '0' }).trustProxy).toBe(false);
    expect(loadConfig({ TRUST_PROXY: 'false' }).trustProxy).toBe(false);
    expect(loadConfig({ TRUST_PROXY: '2' }).trustProxy).toBe(2);
    expect(loadConfig({ TRUST_PROXY: 'loopback, 10.0.0.0/8,fd00::/8, 192.0.2.1' }).trustProxy).toEqual(['loopback', '10.0.0.0/8', 'fd00::/8', '192.0.2.1']);
    for (const bad of ['true', 'yes', '10.0.0.0/33', 'proxy.internal', '1.2.3', '-1']) {
      let problems: string[] = [];
      try {
        loadConfig({ TRUST_PROXY: bad });
      } catch (err) {
        expect(err).toBeInstanceOf(ConfigError);
        problems = (err as ConfigError).problems;
      }
      expect({ bad, problems }).toEqual({ bad, problems: [expect.stringContaining('TRUST_PROXY')] });
    }
  });
});

describe('authentication and the rate limit come before the body is read', () => {
  const json = { 'Content-Type': 'application/json' };

  it('without a key, invalid JSON, a body over 64 KiB and a body of another type get 401, not 400 or 413', async () => {
    const from = '127.0.18.5';
    const big = JSON.stringify({ tool: 'image.render', arguments: { text: 'x'.repeat(70_000) } });
    expectError(await call(stack, from, { method: 'POST', path: '/tools/quote', headers: json, body: '{"tool": ' }), 401, 'platform_api_key_missing');
    expectError(await call(stack, from, { method: 'POST', path: '/tools/quote', headers: json, body: big }), 401, 'platform_api_key_missing');
    expectError(
      await call(stack, from, { method: 'POST', path: '/tools/quote', headers: { 'Content-Type': 'text/plain' }, body: 'hello' }),
      401,
      'platform_api_key_missing',
    );
    expectError(
      await call(stack, from, { method: 'POST', path: '/tools/image.render', headers: { ...json, ...bearer(WRONG) }, body: '[[[' }),
      401,
      'platform_api_key_invalid',
    );
    // with a key, the body is read and judged as before
    const p = await stack.seed();
    expectError(
      await call(stack, from, { method: 'POST', path: '/tools/quote', headers: { ...json, ...bearer(p.secret) }, body: '{"tool": ' }),
      400,
      'invalid_json',
    );
    expectError(
      await call(stack, from, { method: 'POST', path: '/tools/quote', headers: { ...json, ...bearer(p.secret) }, body: big }),
      413,
      'request_too_large',
    );
    expectError(
      await call(stack, from, { method: 'POST', path: '/tools/quote', headers: { 'Content-Type': 'text/plain', ...bearer(p.secret) }, body: 'hello' }),
      400,
      'unsupported_media_type',
    );
  });

  it('such requests count as failed authentications of their address', async () => {
    const from = '127.0.18.6';
    const statuses: number[] = [];
    for (let i = 0; i < AUTH_FAILURES_PER_MINUTE; i++) {
      statuses.push((await call(stack, from, { method: 'POST', path: '/tools/quote', headers: json, body: i % 2 ? '{"tool": ' : 'x'.repeat(70_000) })).status);
    }
    expect(statuses).toEqual(statuses.map(() => 401));
    expectError(await call(stack, from, { method: 'POST', path: '/tools/quote', headers: json, body: '{"tool": ' }), 429, 'rate_limit_exceeded');
  });

  it('a key past its request limit gets 429 before its body is judged', async () => {
    const p = await proxied.seed();
    const from = '127.0.19.2';
    for (let i = 0; i < 5; i++) expect((await call(proxied, from, { headers: bearer(p.secret) })).status).toBe(200);
    for (const body of ['{"tool": ', 'x'.repeat(70_000)]) {
      const a = await call(proxied, from, { method: 'POST', path: '/tools/quote', headers: { ...json, ...bearer(p.secret) }, body });
      expectError(a, 429, 'rate_limit_exceeded');
      expect(a.headers['ratelimit-remaining']).toBe('0');
    }
  });
});
