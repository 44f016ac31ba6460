import { execFile } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { currentTraceparent, serverSpan, tracingOn, withMessageSpan, withPublishSpan, withSpan, withTracing } from '../src';

/**
 * libs/tracing in one process: off, every helper runs its function as it is; on, spans reach an
 * OTLP/HTTP receiver (JSON) with their parent links, a row's traceparent is continued by its
 * publish and the message's headers by its consumer, and a failure is marked by its code only.
 */

interface Attr {
  key: string;
  value: { stringValue?: string };
}

interface Received {
  service: string;
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  status?: { code?: number; message?: string };
  attributes?: Attr[];
}

async function receiver(): Promise<{ url: string; spans: Received[]; close(): Promise<void> }> {
  const spans: Received[] = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString('utf8')));
    req.on('end', () => {
      const parsed = JSON.parse(body) as { resourceSpans: { resource: { attributes: Attr[] }; scopeSpans: { spans: Received[] }[] }[] };
      for (const rs of parsed.resourceSpans) {
        const service = rs.resource.attributes.find((a) => a.key === 'service.name')?.value.stringValue ?? '';
        for (const ss of rs.scopeSpans) for (const s of ss.spans) spans.push({ ...s, service });
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    spans,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

describe('off (no OTEL_EXPORTER_OTLP_ENDPOINT)', () => {
  it('runs each wrapped function as it is: no span, no traceparent, no headers', async () => {
    const running = await withTracing({ otelExporterOtlpEndpoint: null }, { name: 'tes-test', version: '0.0.0' }, async () => ({ parts: [] }));
    expect(running.parts).toEqual([]);
    expect(tracingOn()).toBe(false);
    await expect(
      withSpan('x', async (span) => {
        span.setAttribute('a', 1);
        return currentTraceparent();
      }),
    ).resolves.toBeNull();
    await expect(withPublishSpan('p', '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01', async (headers) => headers)).resolves.toBeUndefined();
    await expect(withMessageSpan('m', { traceparent: 'x' }, async () => 7)).resolves.toBe(7);
    const next = jest.fn();
    serverSpan({ method: 'GET' }, { statusCode: 200, once: () => undefined }, next);
    expect(next).toHaveBeenCalledTimes(1);
  });
});

/**
 * The SDK's OTLP exporter loads node:http with a dynamic import(), which jest's module sandbox
 * refuses: the "on" side runs in a child node process on the built package (npx tsc -b first).
 */
function runChild(script: string, env: Record<string, string> = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      ['-e', script],
      { cwd: path.join(__dirname, '..'), env: { PATH: process.env.PATH ?? '', ...env }, timeout: 30_000 },
      (err, stdout, stderr) => (err ? reject(new Error(`${err.message}\n${stderr}`)) : resolve(stdout)),
    );
  });
}

const BUILT = `require(${JSON.stringify(path.join(__dirname, '..', 'dist'))})`;

it('off, the SDK is not even loaded', async () => {
  const out = await runChild(`
    const t = ${BUILT};
    t.withTracing({ otelExporterOtlpEndpoint: null }, { name: 'tes-test', version: '0.0.0' }, async () => ({ parts: [] })).then(() => {
      process.stdout.write(JSON.stringify(Object.keys(require.cache).filter((k) => k.includes('@opentelemetry/sdk-'))));
    });`);
  expect(JSON.parse(out)).toEqual([]);
});

describe('on', () => {
  it('exports spans with their parents: a row continued by its publish, the message by its consumer; failures by code', async () => {
    const r = await receiver();
    try {
      const out = await runChild(
        `
        const t = ${BUILT};
        (async () => {
          const running = await t.withTracing({ otelExporterOtlpEndpoint: process.env.ENDPOINT }, { name: 'tes-test', version: '0.0.0' }, async () => ({ parts: [] }));
          const result = { on: t.tracingOn() };
          // a submit writes its traceparent into the row; later (the relay) the row is published
          let row = null;
          await t.withSpan('execution.submit', async () => { row = t.currentTraceparent(); });
          const headers = await t.withPublishSpan('outbox.publish', row, async (h) => h);
          // the worker's side: AMQP may hand the header over as a Buffer
          await t.withMessageSpan('execution.process', { traceparent: Buffer.from(headers.traceparent) }, () => t.withSpan('execution.claim', async () => undefined));
          await t.withSpan('execution.settle', async () => {
            throw Object.assign(new Error('secret detail /presigned?X-Amz-Signature=abc'), { code: 'lease_lost' });
          }).catch((err) => (result.rethrown = err.message));
          // shutdown flushes what is batched, and turns the helpers off again
          for (const part of running.parts) await part.stop();
          Object.assign(result, { row, headers, off: !t.tracingOn(), parts: running.parts.map((p) => p.name) });
          process.stdout.write(JSON.stringify(result));
        })();`,
        { ENDPOINT: r.url },
      );
      const result = JSON.parse(out) as { on: boolean; off: boolean; row: string; headers: { traceparent: string }; rethrown: string; parts: string[] };
      expect(result).toMatchObject({ on: true, off: true, parts: ['tracing'], rethrown: expect.stringContaining('secret detail') });
      expect(result.row).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
      expect(result.headers.traceparent.split('-')[1]).toBe(result.row.split('-')[1]);
      expect(result.headers.traceparent).not.toBe(result.row);

      const byName = new Map(r.spans.map((s) => [s.name, s]));
      expect([...byName.keys()].sort()).toEqual(['execution.claim', 'execution.process', 'execution.settle', 'execution.submit', 'outbox.publish']);
      expect(new Set(r.spans.map((s) => s.service))).toEqual(new Set(['tes-test']));
      const parentOf = (name: string) => r.spans.find((s) => s.spanId === byName.get(name)!.parentSpanId)?.name;
      expect(parentOf('outbox.publish')).toBe('execution.submit');
      expect(parentOf('execution.process')).toBe('outbox.publish');
      expect(parentOf('execution.claim')).toBe('execution.process');
      expect(byName.get('execution.submit')!.parentSpanId ?? '').toBe('');
      expect(new Set(r.spans.filter((s) => s.name !== 'execution.settle').map((s) => s.traceId)).size).toBe(1);
      expect(byName.get('execution.settle')!.status).toMatchObject({ code: 2, message: 'lease_lost' });
      expect(JSON.stringify(r.spans)).not.toContain('secret detail');
    } finally {
      await r.close();
    }
  });

  it('a log line written inside a span carries its trace_id and span_id (logger.log and logFields); outside one, none', async () => {
    const r = await receiver();
    try {
      const lib = (name: string) => JSON.stringify(path.join(__dirname, '../..', name, 'dist'));
      const out = await runChild(
        `
        const t = ${BUILT};
        const o = require(${lib('observability')});
        const { CaptureTransport } = require(${JSON.stringify(path.join(__dirname, '../../testing/dist/logs.js'))});
        (async () => {
          const capture = new CaptureTransport();
          const logger = o.createLogger({ service: 'tes-test', transports: [capture] });
          const running = await t.withTracing({ otelExporterOtlpEndpoint: process.env.ENDPOINT }, 'tes-test', async () => ({ parts: [] }));
          logger.info('outside.span');
          await t.withSpan('execution.step', async () => {
            logger.info('inside.winston', { executionId: 'exe_1' });
            o.logFields(logger, 'info', 'inside.fields', { executionId: 'exe_1' });
            await new Promise((resolve) => setTimeout(resolve, 5));
            logger.warn('inside.after_await');
          });
          for (const part of running.parts) await part.stop();
          process.stdout.write(JSON.stringify(capture.lines.map((l) => JSON.parse(l))));
        })();`,
        { ENDPOINT: r.url },
      );
      const lines = JSON.parse(out) as Record<string, unknown>[];
      const step = r.spans.find((s) => s.name === 'execution.step')!;
      expect(step.traceId).toMatch(/^[0-9a-f]{32}$/);
      const ids = (message: string) => {
        const line = lines.find((l) => l.message === message)!;
        return { trace_id: line.trace_id, span_id: line.span_id };
      };
      expect(ids('outside.span')).toEqual({ trace_id: undefined, span_id: undefined });
      for (const message of ['inside.winston', 'inside.fields', 'inside.after_await']) {
        expect([message, ids(message)]).toEqual([message, { trace_id: step.traceId, span_id: step.spanId }]);
      }
    } finally {
      await r.close();
    }
  });
});
