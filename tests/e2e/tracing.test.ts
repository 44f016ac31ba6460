import { RELEASE } from '@tes/core';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { seedProject } from '@tes/testing';
import { Cluster, sleep } from '../faults/cluster';
import { startFakeProviders, type FakeProviders } from '../fake-providers';

/**
 * Tracing on (OTEL_EXPORTER_OTLP_ENDPOINT): the compiled gateway, worker and relay as real
 * processes export to a small OTLP/HTTP receiver run here (the http exporter sends JSON), and
 * one submit run to its end is one trace, from the gateway's request span through the submit,
 * the outbox publish and the RabbitMQ message (traceparent header) into the worker's claim,
 * step, S3 put and settlement; a provider step's re-check, through the delay queue, stays in
 * the same trace.
 */

interface OtlpValue {
  stringValue?: string;
  intValue?: string | number;
  doubleValue?: number;
  boolValue?: boolean;
}
interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  attributes?: { key: string; value: OtlpValue }[];
}
interface ReceivedSpan extends OtlpSpan {
  service: string;
  attrs: Record<string, string | number | boolean>;
}
interface OtlpRequest {
  resourceSpans?: {
    resource?: { attributes?: { key: string; value: OtlpValue }[] };
    scopeSpans?: { spans?: OtlpSpan[] }[];
  }[];
}

const SPAN_KIND = { INTERNAL: 1, SERVER: 2, PRODUCER: 4, CONSUMER: 5 } as const;

function attributes(list: { key: string; value: OtlpValue }[] | undefined): Record<string, string | number | boolean> {
  const out: Record<string, string | number | boolean> = {};
  for (const { key, value } of list ?? []) {
    const v = value.stringValue ?? value.intValue ?? value.doubleValue ?? value.boolValue;
    if (v !== undefined) out[key] = typeof v === 'string' && value.intValue !== undefined ? Number(v) : v;
  }
  return out;
}

/** An OTLP/HTTP trace receiver: every span posted to /v1/traces, with its resource's service.name. */
class OtlpReceiver {
  readonly spans: ReceivedSpan[] = [];
  readonly contentTypes = new Set<string>();
  /** Every resource's service.version: the release (issue #27). */
  readonly versions = new Set<string>();
  private readonly server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.method !== 'POST' || req.url !== '/v1/traces') {
        res.writeHead(404).end();
        return;
      }
      this.contentTypes.add(String(req.headers['content-type']));
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as OtlpRequest;
      for (const rs of body.resourceSpans ?? []) {
        const service = String(attributes(rs.resource?.attributes)['service.name']);
        this.versions.add(String(attributes(rs.resource?.attributes)['service.version']));
        for (const ss of rs.scopeSpans ?? []) for (const s of ss.spans ?? []) this.spans.push({ ...s, service, attrs: attributes(s.attributes) });
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });

  async start(): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  stop(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

const receiver = new OtlpReceiver();
let cluster: Cluster;
let fake: FakeProviders;

beforeAll(async () => {
  const endpoint = await receiver.start();
  fake = await startFakeProviders();
  cluster = await Cluster.start({
    env: {
      OTEL_EXPORTER_OTLP_ENDPOINT: endpoint,
      OTEL_BSP_SCHEDULE_DELAY: '100',
      ...fake.env,
      PROVIDER_ALLOW_PRIVATE_NETWORKS: '1',
      WAIT_RECHECK_MS: '150',
    },
  });
}, 90_000);

afterAll(async () => {
  await cluster?.shutdown();
  await fake?.stop();
  await receiver.stop();
}, 60_000);

async function call(method: string, path: string, secret: string, body?: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(`${cluster.baseUrl}${path}`, {
    method,
    headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json', ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as { data: Record<string, unknown> } };
}

/** Quotes and submits; the execution's id. */
async function submit(secret: string, tool: string, args: Record<string, unknown>, key: string) {
  const quote = await call('POST', '/tools/quote', secret, { tool, arguments: args });
  expect(quote.status).toBe(200);
  const res = await call(
    'POST',
    `/tools/${tool}`,
    secret,
    { tool, arguments: args, priceVersion: quote.body.data.priceVersion, maximumChargeMicros: quote.body.data.maximumChargeMicros },
    { 'Idempotency-Key': key },
  );
  expect(res.status).toBe(202);
  return res.body.data as { id: string; reservedMicros: number };
}

async function waitSucceeded(secret: string, id: string): Promise<void> {
  await eventually(`execution ${id} did not succeed`, async () => {
    const r = await call('GET', `/tools/executions/${id}`, secret);
    return r.body.data.status === 'succeeded' ? true : undefined;
  });
}

/** The spans of the trace of `id`'s settlement, once it arrived, by span id. */
async function traceOfSettlement(id: string): Promise<{ settle: ReceivedSpan; trace: ReceivedSpan[]; byId: Map<string, ReceivedSpan> }> {
  const claim = await eventually(`no claim span of ${id} arrived`, () =>
    receiver.spans.find((s) => s.name === 'execution.claim' && s.attrs['tes.execution.id'] === id),
  );
  const settle = await eventually(`no settlement span of ${id} arrived`, () =>
    receiver.spans.find((s) => s.name === 'execution.settle' && s.traceId === claim.traceId),
  );
  // a parent ends after its child (the process span after its settle span), so it may come in a
  // later export batch: the trace is read once every parent named in it has arrived (or never)
  const complete = () => {
    const trace = receiver.spans.filter((s) => s.traceId === settle.traceId);
    const ids = new Set(trace.map((s) => s.spanId));
    return trace.every((s) => !s.parentSpanId || ids.has(s.parentSpanId)) ? trace : undefined;
  };
  const trace = await eventually(`the trace of ${id} names a parent span that never arrived`, complete).catch(() =>
    receiver.spans.filter((s) => s.traceId === settle.traceId),
  );
  return { settle, trace, byId: new Map(trace.map((s) => [s.spanId, s])) };
}

function ancestry(span: ReceivedSpan, byId: Map<string, ReceivedSpan>): string[] {
  const chain: string[] = [];
  for (let s: ReceivedSpan | undefined = span; s; s = s.parentSpanId ? byId.get(s.parentSpanId) : undefined) chain.push(`${s.service} ${s.name}`);
  return chain;
}

async function eventually<T>(what: string, probe: () => Promise<T | undefined> | T | undefined, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`${what} within ${timeoutMs} ms`);
    await sleep(100);
  }
}

test('a submit is one trace: gateway request → submit → outbox publish → worker claim, step, S3 put → settlement', async () => {
  const p = await seedProject(cluster.db, { creditMicros: 1_000_000 });
  const submitted = await submit(p.secret, 'image.render', { text: 'traced', width: 320, height: 200, format: 'png' }, 'trace-0001');
  const id = submitted.id;
  await waitSucceeded(p.secret, id);

  const { settle, trace, byId } = await traceOfSettlement(id);
  expect(settle.attrs['tes.execution.status']).toBe('succeeded');
  // every span of the trace hangs from a span of the same trace, up to one root
  const roots = trace.filter((s) => !s.parentSpanId);
  expect(roots.map((s) => `${s.service} ${s.name}`)).toEqual(['tes-gateway POST /tools/{tool}']);
  expect([...receiver.versions]).toEqual([RELEASE]);
  for (const s of trace) if (s.parentSpanId) expect(byId.has(s.parentSpanId)).toBe(true);

  // the settlement's ancestry is the execution's path through the services
  expect(ancestry(settle, byId)).toEqual([
    'tes-worker execution.settle',
    'tes-worker execution.process',
    expect.stringMatching(/^tes-(gateway|relay) outbox\.publish$/), // the relay publishes a row the gateway could not
    'tes-gateway execution.submit',
    'tes-gateway POST /tools/{tool}',
  ]);
  const root = roots[0]!;
  expect(root.kind).toBe(SPAN_KIND.SERVER);
  expect(root.attrs).toMatchObject({ 'http.route': '/tools/{tool}', 'http.request.method': 'POST', 'http.response.status_code': 202 });
  const consumer = byId.get(settle.parentSpanId!)!;
  expect(consumer.kind).toBe(SPAN_KIND.CONSUMER);
  expect(byId.get(consumer.parentSpanId!)!.kind).toBe(SPAN_KIND.PRODUCER);

  // the worker's claim, its one step (units and cost) and the S3 put are children of its message span
  const children = (name: string) => trace.filter((s) => s.name === name && s.parentSpanId === consumer.spanId);
  expect(children('execution.claim')).toHaveLength(1);
  expect(children('execution.claim')[0]!.attrs['tes.execution.id']).toBe(id);
  const steps = children('execution.step');
  expect(steps).toHaveLength(1);
  expect(steps[0]!.attrs).toMatchObject({
    'tes.tool': 'image.render',
    'tes.step.index': 0,
    'tes.step.units': expect.any(Number),
    'tes.step.cost_micros': submitted.reservedMicros,
  });
  expect(children('s3.put')).toHaveLength(1);
  expect(children('s3.put')[0]!.attrs['tes.artifact.format']).toBe('png');
  expect(settle.attrs['tes.charged_micros']).toBe(submitted.reservedMicros);

  // every answered request is named by its route template (the polls above, a 401)
  await call('GET', '/tools/executions/exe_unknown', 'tes_not_a_key');
  for (const [route, status] of [
    ['GET /tools/executions/{id}', 200],
    ['GET /tools/executions/{id}', 401],
  ] as const) {
    await eventually(`no ${route} ${status} server span`, () =>
      receiver.spans.find((s) => s.name === route && s.kind === SPAN_KIND.SERVER && s.attrs['http.response.status_code'] === status),
    );
  }

  // the log lines join the trace: the request's access line (span: the request), the submit's
  // line, and the worker's lines about this execution, each with the trace's id
  const logs = (service: 'gateway' | 'worker') =>
    cluster.lines(service).flatMap((l) => {
      try {
        return [JSON.parse(l) as Record<string, unknown>];
      } catch {
        return [];
      }
    });
  const accepted = logs('gateway').find((l) => l.message === 'gateway.execution.accepted' && l.executionId === id)!;
  expect(accepted.trace_id).toBe(settle.traceId);
  expect(byId.has(accepted.span_id as string)).toBe(true);
  const access = await eventually('no access log line of the submit', () =>
    logs('gateway').find((l) => l.message === 'gateway.http.request' && l.requestId === accepted.requestId),
  );
  expect(access).toMatchObject({ route: '/tools/{tool}', status: 202, trace_id: settle.traceId, span_id: root.spanId });
  const workerLines = logs('worker').filter((l) => l.executionId === id);
  for (const message of ['worker.execution.claimed', 'worker.step.succeeded']) {
    const line = workerLines.find((l) => l.message === message);
    expect([message, line?.trace_id, byId.has(line?.span_id as string)]).toEqual([message, settle.traceId, true]);
  }

  // JSON, as the http exporter sends it; and no secret reached a span
  expect([...receiver.contentTypes]).toEqual(['application/json']);
  expect(JSON.stringify(receiver.spans)).not.toContain(p.secret);
}, 90_000);

test("a provider step's re-check comes back through the delay queue in the same trace", async () => {
  const p = await seedProject(cluster.db, { creditMicros: 1_000_000 });
  const { id } = await submit(p.secret, 'image.generate', { model: 'replicate/flux-schnell', prompt: 'a traced fox [polls:2]', count: 1 }, 'trace-0002');
  await waitSucceeded(p.secret, id);

  const { settle, trace, byId } = await traceOfSettlement(id);
  const chain = ancestry(settle, byId);
  // the settlement's message span is a re-check's: it hangs from a delayed publish of an earlier one
  expect(chain.slice(0, 3)).toEqual(['tes-worker execution.settle', 'tes-worker execution.process', 'tes-worker execution.publish_later']);
  expect(chain.at(-1)).toBe('tes-gateway POST /tools/{tool}');
  expect(chain.at(-2)).toBe('tes-gateway execution.submit');
  // a message span per pass (the first run, then each re-check), and the step's span in each
  expect(trace.filter((s) => s.name === 'execution.process').length).toBeGreaterThanOrEqual(2);
  expect(trace.filter((s) => s.name === 'execution.step').length).toBeGreaterThanOrEqual(2);
  expect(trace.filter((s) => !s.parentSpanId)).toHaveLength(1);
}, 90_000);
