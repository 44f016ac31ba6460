import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { GuardedHttp } from '@tes/outbound';
import { createMetrics, type Metrics } from '@tes/observability';
import { fetchOutput, ReadFailed, type ProviderContext } from '../src/providers/common';
import { replicateCreate, replicatePoll } from '../src/providers/replicate';
import { openaiGenerateImages } from '../src/providers/openai';

/**
 * Every provider HTTP attempt lands in tes_provider_request_duration_seconds with its
 * provider, operation and outcome (retried attempts included), against a loopback provider.
 */
let server: http.Server;
let base: string;
let predictionStatus = 200;

beforeAll(async () => {
  server = http.createServer((req, res) => {
    if (req.method === 'POST' && req.url?.startsWith('/models/')) {
      res.writeHead(201, { 'Content-Type': 'application/json' });
      return void res.end('{"id":"p1","status":"starting"}');
    }
    if (req.url === '/predictions/p1') {
      res.writeHead(predictionStatus, { 'Content-Type': 'application/json' });
      return void res.end(`{"id":"p1","status":"succeeded","output":["${base}/out.png"]}`);
    }
    if (req.url === '/images/generations') {
      res.writeHead(400, { 'Content-Type': 'application/json' });
      return void res.end('{"error":{"message":"bad prompt"}}');
    }
    if (req.url === '/out.png') {
      res.writeHead(200, { 'Content-Type': 'image/png' });
      return void res.end('png');
    }
    res.writeHead(404);
    res.end();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

function context(metrics: Metrics): ProviderContext {
  return {
    http: new GuardedHttp({ allowPrivateNetworks: true }),
    baseUrls: { replicate: base, fal: base, openai: base },
    credentials: { replicate: 'r8_test', openai: 'sk-test' },
    jobTimeoutMs: 60_000,
    signal: AbortSignal.timeout(10_000),
    metrics,
  };
}

/** Observations per provider/operation/outcome, from the histogram's _count series. */
async function counts(metrics: Metrics): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const v of (await metrics.providerRequests.get()).values) {
    if (v.metricName !== 'tes_provider_request_duration_seconds_count') continue;
    out[`${v.labels.provider}/${v.labels.operation}/${v.labels.outcome}`] = v.value;
  }
  return out;
}

it('counts each attempt by provider, operation and outcome', async () => {
  const metrics = createMetrics('worker', false);
  const ctx = context(metrics);
  const id = await replicateCreate(ctx, 'owner/model', { prompt: 'x' });
  predictionStatus = 200;
  const polled = await replicatePoll(ctx, id);
  expect(polled).toEqual({ done: true, outputs: [{ url: `${base}/out.png`, provider: 'replicate' }] });
  if (!('done' in polled) || !polled.done) throw new Error('expected outputs');
  await fetchOutput(ctx, polled.outputs[0]!, 1_000);
  // a 5xx is retried within the read's window: every attempt is counted
  predictionStatus = 503;
  await expect(replicatePoll(ctx, id)).rejects.toBeInstanceOf(ReadFailed);
  await expect(
    openaiGenerateImages(ctx, { model: 'gpt-image-1.5', prompt: 'x', n: 1, size: '1024x1024', quality: 'medium', output_format: 'png' }),
  ).rejects.toThrow(/rejected/);

  const c = await counts(metrics);
  expect(c['replicate/create/ok']).toBe(1);
  expect(c['replicate/poll/ok']).toBe(1);
  expect(c['replicate/download/ok']).toBe(1);
  expect(c['replicate/poll/server_error']).toBeGreaterThanOrEqual(2);
  expect(c['openai/create/rejected']).toBe(1);
});

it('does not count a call our own signal cut short', async () => {
  const metrics = createMetrics('worker', false);
  const controller = new AbortController();
  controller.abort(new Error('shutting down'));
  const ctx = { ...context(metrics), signal: controller.signal };
  await expect(replicatePoll(ctx, 'p1')).rejects.toThrow();
  expect(await counts(metrics)).toEqual({});
});
