/**
 * The access log's sampling and its histogram, on an Express app of its own (no database):
 * successful answers are written at the configured share, refusals and errors always.
 */
import express from 'express';
import supertest from 'supertest';
import { ConfigError, loadConfig } from '@tes/config';
import { createLogger, createMetrics } from '@tes/observability';
import { CaptureTransport } from '@tes/testing';
import { AccessLog, markError, markRoute } from '../src/access-log';

function appWith(sample: number) {
  const logs = new CaptureTransport();
  const logger = createLogger({ service: 'test', transports: [logs] });
  const metrics = createMetrics('gateway', false);
  const log = new AccessLog(logger, metrics.httpDuration, sample);
  const app = express();
  let n = 0;
  app.use((req, res, next) => {
    log.begin(req, res, `req-${++n}`);
    next();
  });
  app.get('/ok', (_req, res) => {
    markRoute(res, '/ok');
    res.json({ ok: true });
  });
  app.get('/refused', (_req, res) => {
    markRoute(res, '/refused');
    markError(res, 'rate_limit_exceeded');
    res.status(429).json({ error: { status: 'RESOURCE_EXHAUSTED', message: 'rate_limit_exceeded' } });
  });
  return { app, logs, metrics };
}

const lines = (logs: CaptureTransport) => logs.records.filter((r) => r.message === 'gateway.http.request');

it('ACCESS_LOG_SAMPLE=0 writes no successful answer but every refusal; the histogram counts them all', async () => {
  const { app, logs, metrics } = appWith(0);
  for (let i = 0; i < 20; i++) expect((await supertest(app).get('/ok')).status).toBe(200);
  expect((await supertest(app).get('/refused')).status).toBe(429);
  expect((await supertest(app).get('/nowhere')).status).toBe(404);
  expect(lines(logs).map((l) => [l.route, l.status, l.errorCode])).toEqual([
    ['/refused', 429, 'rate_limit_exceeded'],
    ['unmatched', 404, undefined],
  ]);
  const text = await metrics.registry.metrics();
  expect(text).toMatch(/tes_http_request_duration_seconds_count\{[^}]*route="\/ok",status="200"\} 20/);
  expect(text).toMatch(/tes_http_request_duration_seconds_count\{[^}]*route="\/refused",status="429"\} 1/);
});

it('ACCESS_LOG_SAMPLE=0.5 writes about half of the successful answers', async () => {
  const { app, logs } = appWith(0.5);
  for (let i = 0; i < 200; i++) await supertest(app).get('/ok');
  // binomial(200, 0.5): outside 60..140 with probability < 1e-8
  expect(lines(logs).length).toBeGreaterThan(60);
  expect(lines(logs).length).toBeLessThan(140);
});

it('ACCESS_LOG_SAMPLE=1 (the default) writes every answer', async () => {
  const { app, logs } = appWith(loadConfig({}).accessLogSample);
  for (let i = 0; i < 10; i++) await supertest(app).get('/ok');
  expect(lines(logs)).toHaveLength(10);
  expect(lines(logs)[0]).toMatchObject({ level: 'info', requestId: 'req-1', method: 'GET', route: '/ok', status: 200 });
});

it('ACCESS_LOG_SAMPLE takes a share from 0 to 1', () => {
  expect(loadConfig({ ACCESS_LOG_SAMPLE: '0.25' }).accessLogSample).toBe(0.25);
  expect(loadConfig({ ACCESS_LOG_SAMPLE: '0' }).accessLogSample).toBe(0);
  for (const bad of ['2', '-0.1', 'half', '1e-2', '0.5x']) expect(() => loadConfig({ ACCESS_LOG_SAMPLE: bad })).toThrow(ConfigError);
});
