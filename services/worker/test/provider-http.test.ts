import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { StepError } from '@tes/core';
import { BlockedAddressError, HttpStatusError, GuardedHttp, retryableCreate, retryableRead, withRetries } from '@tes/outbound';
import { classifyCreateError } from '../src/providers/common';
import { OutcomeUnknown } from '../src/outcome-unknown';

let server: http.Server;
let port: number;
let hits: string[] = [];

beforeAll(async () => {
  server = http.createServer((req, res) => {
    hits.push(req.url ?? '');
    if (req.url === '/redirect') {
      res.writeHead(302, { Location: '/ok' });
      return void res.end();
    }
    if (req.url === '/big') return void res.end(Buffer.alloc(10_000));
    if (req.url === '/500') {
      res.writeHead(500);
      return void res.end('boom');
    }
    if (req.url === '/429') {
      res.writeHead(429, { 'Retry-After': '0' });
      return void res.end('slow down');
    }
    res.writeHead(200, { 'Content-Type': 'application/json' });
    res.end('{"ok":true}');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  port = (server.address() as AddressInfo).port;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

beforeEach(() => {
  hits = [];
});

const signal = () => AbortSignal.timeout(5_000);

describe('address guard (SSRF)', () => {
  const guarded = new GuardedHttp({ allowPrivateNetworks: false });

  it.each([
    ['loopback literal', () => `http://127.0.0.1:${port}/ok`],
    ['a name that resolves to loopback', () => `http://localhost:${port}/ok`],
    ['IPv6 loopback', () => `http://[::1]:${port}/ok`],
    ['IPv4-mapped IPv6 loopback', () => `http://[::ffff:127.0.0.1]:${port}/ok`],
    ['cloud metadata (link-local)', () => 'http://169.254.169.254/latest/meta-data/'],
    ['private network', () => 'http://10.1.2.3/'],
    ['carrier-grade NAT', () => 'http://100.64.0.1/'],
    ['unspecified', () => `http://0.0.0.0:${port}/ok`],
  ])('refuses %s before any byte is sent', async (_name, url) => {
    await expect(guarded.request('GET', url(), { signal: signal() })).rejects.toBeInstanceOf(BlockedAddressError);
    expect(hits).toEqual([]);
  });

  it('refuses schemes other than http and https', async () => {
    await expect(guarded.request('GET', 'file:///etc/passwd', { signal: signal() })).rejects.toThrow(/unsupported URL scheme/);
  });

  it('lets loopback through only when explicitly allowed (tests with local fakes)', async () => {
    const open = new GuardedHttp({ allowPrivateNetworks: true });
    const res = await open.json<{ ok: boolean }>('GET', `http://127.0.0.1:${port}/ok`, { signal: signal() });
    expect(res).toEqual({ ok: true });
  });
});

describe('requests', () => {
  const open = new GuardedHttp({ allowPrivateNetworks: true });

  it('follows redirects by hand', async () => {
    const res = await open.request('GET', `http://127.0.0.1:${port}/redirect`, { signal: signal() });
    expect(res.status).toBe(200);
    expect(hits).toEqual(['/redirect', '/ok']);
  });

  it('caps response bodies', async () => {
    await expect(open.request('GET', `http://127.0.0.1:${port}/big`, { signal: signal(), maxBytes: 1_000 })).rejects.toThrow(/larger than 1000 bytes/);
  });

  it('never retries a create that failed with 500 (it may have started work), retries a 429', async () => {
    await expect(
      withRetries(() => open.json('POST', `http://127.0.0.1:${port}/500`, { json: {}, signal: signal() }), retryableCreate, signal()),
    ).rejects.toBeInstanceOf(HttpStatusError);
    expect(hits).toEqual(['/500']);
    hits = [];
    await expect(
      withRetries(() => open.json('POST', `http://127.0.0.1:${port}/429`, { json: {}, signal: signal() }), retryableCreate, signal(), 3),
    ).rejects.toBeInstanceOf(HttpStatusError);
    expect(hits).toEqual(['/429', '/429', '/429']);
  });

  it('retries reads on 5xx', async () => {
    await expect(withRetries(() => open.json('GET', `http://127.0.0.1:${port}/500`, { signal: signal() }), retryableRead, signal(), 2)).rejects.toBeInstanceOf(
      HttpStatusError,
    );
    expect(hits).toEqual(['/500', '/500']);
  });
});

describe('classifying a failed create', () => {
  it('tells a refusal (provider_error) from an unknown outcome (needs_review)', () => {
    expect(classifyCreateError(new HttpStatusError(422, 'bad input', undefined))).toBeInstanceOf(StepError);
    expect(classifyCreateError(new HttpStatusError(429, '', undefined))).toBeInstanceOf(StepError);
    expect(classifyCreateError(new BlockedAddressError('x', '10.0.0.1', 'private'))).toBeInstanceOf(StepError);
    expect(classifyCreateError(Object.assign(new Error('getaddrinfo ENOTFOUND'), { code: 'ENOTFOUND' }))).toBeInstanceOf(StepError);
    expect(classifyCreateError(new HttpStatusError(500, 'boom', undefined))).toBeInstanceOf(OutcomeUnknown);
    expect(classifyCreateError(new HttpStatusError(502, '', undefined))).toBeInstanceOf(OutcomeUnknown);
    expect(classifyCreateError(Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' }))).toBeInstanceOf(OutcomeUnknown);
    expect(classifyCreateError(new Error('provider request timed out'))).toBeInstanceOf(OutcomeUnknown);
  });
});
