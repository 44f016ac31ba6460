import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { StepError } from '@tes/core';
import { fetchOutput, read, ReadFailed, type ProviderContext } from '../src/providers/common';
import { HttpStatusError, GuardedHttp, retryableRead, retryWithin } from '@tes/outbound';

/**
 * Reads of a provider job that exists (status, result, output files): a failure is a
 * ReadFailed for the step to wait out, never a step failure, and waiting ends at once when
 * the step's signal aborts. Against a loopback server.
 */
let server: http.Server;
let base: string;
let hits: string[] = [];

beforeAll(async () => {
  server = http.createServer((req, res) => {
    hits.push(req.url ?? '');
    if (req.url === '/500') {
      res.writeHead(500);
      return void res.end('boom');
    }
    if (req.url === '/404') {
      res.writeHead(404);
      return void res.end('gone');
    }
    if (req.url === '/429-long') {
      res.writeHead(429, { 'Retry-After': '30' });
      return void res.end('slow down');
    }
    if (req.url === '/drop') return void req.socket.destroy();
    res.writeHead(200, { 'Content-Type': 'image/png' });
    res.end('png');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

beforeEach(() => {
  hits = [];
});

const open = new GuardedHttp({ allowPrivateNetworks: true });

function context(signal: AbortSignal, allowPrivateNetworks = true): ProviderContext {
  return {
    http: new GuardedHttp({ allowPrivateNetworks }),
    baseUrls: { replicate: base, fal: base, openai: base },
    credentials: {},
    jobTimeoutMs: 60_000,
    signal,
  };
}

describe('retryWithin', () => {
  it('starts new attempts only within its window, then rejects with the last error', async () => {
    const started = Date.now();
    await expect(
      retryWithin(() => open.json('GET', `${base}/500`, { signal: AbortSignal.timeout(5_000) }), retryableRead, AbortSignal.timeout(5_000), 600),
    ).rejects.toBeInstanceOf(HttpStatusError);
    expect(Date.now() - started).toBeLessThan(1_500);
    expect(hits.length).toBeGreaterThanOrEqual(2);
  });

  it('does not sleep past its window for a long Retry-After: the caller waits that out itself', async () => {
    const started = Date.now();
    await expect(
      retryWithin(() => open.json('GET', `${base}/429-long`, { signal: AbortSignal.timeout(5_000) }), retryableRead, AbortSignal.timeout(5_000), 1_000),
    ).rejects.toMatchObject({ status: 429, retryAfterMs: 30_000 });
    expect(hits).toEqual(['/429-long']);
    expect(Date.now() - started).toBeLessThan(500);
  });

  it('ends its backoff sleep as soon as the signal aborts, with the signal’s reason', async () => {
    const controller = new AbortController();
    const reason = new Error('lease lost');
    let attempts = 0;
    const failing = () => {
      attempts++;
      return Promise.reject(new HttpStatusError(503, '', 60_000));
    };
    const started = Date.now();
    const pending = retryWithin(failing, retryableRead, controller.signal, 120_000);
    setTimeout(() => controller.abort(reason), 50);
    await expect(pending).rejects.toBe(reason);
    expect(Date.now() - started).toBeLessThan(1_000);
    expect(attempts).toBe(1);
  });
});

describe('read', () => {
  it('turns an answer that is no answer (5xx, 4xx, dropped connection) into ReadFailed, not a step failure', async () => {
    for (const path of ['/500', '/404', '/drop']) {
      const err = await read(() => open.json('GET', `${base}${path}`, { signal: AbortSignal.timeout(5_000) }), AbortSignal.timeout(5_000)).catch(
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(ReadFailed);
    }
  });

  it('keeps the Retry-After of a rate limit for the step to honour', async () => {
    const err = await read(() => open.json('GET', `${base}/429-long`, { signal: AbortSignal.timeout(5_000) }), AbortSignal.timeout(5_000)).catch(
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ReadFailed);
    expect((err as ReadFailed).retryAfterMs).toBe(30_000);
  });

  it('rethrows the abort reason, so the engine acts on shutdown or lease loss rather than on the read', async () => {
    const controller = new AbortController();
    const reason = new Error('shutting down');
    const pending = read(() => open.json('GET', `${base}/500`, { signal: controller.signal }), controller.signal).catch((e: unknown) => e);
    setTimeout(() => controller.abort(reason), 20);
    expect(await pending).toBe(reason);
  });
});

describe('fetchOutput', () => {
  it('fetches a file; a file that cannot be fetched is a ReadFailed', async () => {
    const ctx = context(AbortSignal.timeout(5_000));
    await expect(fetchOutput(ctx, { url: `${base}/ok.png` }, 1_000)).resolves.toEqual({ body: Buffer.from('png'), contentType: 'image/png' });
    await expect(fetchOutput(ctx, { url: `${base}/500` }, 1_000)).rejects.toBeInstanceOf(ReadFailed);
    await expect(fetchOutput(ctx, { url: `${base}/drop` }, 1_000)).rejects.toBeInstanceOf(ReadFailed);
  });

  it('keeps the Retry-After of a rate limit on a file, for the step to honour', async () => {
    const err = await fetchOutput(context(AbortSignal.timeout(5_000)), { url: `${base}/429-long` }, 1_000).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ReadFailed);
    expect((err as ReadFailed).retryAfterMs).toBe(30_000);
  });

  it('refuses an output URL on a private address as a provider_error, before any request', async () => {
    const ctx = context(AbortSignal.timeout(5_000), false);
    await expect(fetchOutput(ctx, { url: `${base}/ok.png` }, 1_000)).rejects.toBeInstanceOf(StepError);
    expect(hits).toEqual([]);
  });
});
