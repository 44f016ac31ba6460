import { Catalog, DEFAULT_PRICE_LIST, type PriceList } from '@tes/catalog';
import { newId, type ErrorCode } from '@tes/core';
import type { ExecutionRecord, StepRecord } from '@tes/db';
import { httpFor } from '../../../services/gateway/src/errors';
import { publicExecution } from '@tes/db';
import { OpenApiValidator, type ResponseHeaders } from '../src/openapi';
import { doc, needsAuth, operations, validator, type Obj } from './openapi-doc';

/** OpenApiValidator against bodies built the way the gateway builds them: what it accepts, what it rejects, how it matches paths. */

// ---------------------------------------------------------------------------------------
// Samples built the way the gateway builds its bodies.

const VERSION = '2026-11-01.1';
const catalog = new Catalog({ enableTestTools: true });
const T0 = '2026-11-21T10:15:30.123Z';
const T1 = '2026-11-21T10:15:31.456Z';
const T2 = '2026-11-21T10:15:35.789Z';
const SHA = 'a'.repeat(64);

function record(over: Partial<ExecutionRecord> = {}): ExecutionRecord {
  return {
    id: newId('exe'),
    projectId: newId('prj'),
    apiKeyId: newId('key'),
    tool: 'test.sleep',
    model: 'sleep',
    category: 'test',
    status: 'queued',
    arguments: { seconds: 1, steps: 2, costMicrosPerStep: 1000, model: 'sleep' },
    priceVersion: VERSION,
    totalSteps: 2,
    reservedMicros: 2000,
    chargedMicros: 0,
    cancelRequested: false,
    idempotencyKey: 'sleep-0001',
    requestDigest: 'b'.repeat(64),
    output: null,
    errorCode: null,
    errorMessage: null,
    leaseOwner: null,
    attempts: 0,
    createdAt: T0,
    startedAt: null,
    finishedAt: null,
    ...over,
  };
}

function step(e: ExecutionRecord, index: number, over: Partial<StepRecord> = {}): StepRecord {
  return {
    executionId: e.id,
    index,
    name: `sleep_${index}`,
    status: 'succeeded',
    costMicros: 1000,
    externalRef: null,
    checkpoint: null,
    errorCode: null,
    attempts: 1,
    startedAt: T1,
    finishedAt: T2,
    ...over,
  };
}

const artifact = () => ({ id: newId('art'), format: 'txt', mimeType: 'text/plain', sizeBytes: 31, sha256: SHA, expiresAt: '2026-12-21T10:15:35.789Z' });

const queued = record();
const runningRec = record({ status: 'running', startedAt: T1, attempts: 1 });
const running = publicExecution(runningRec, [step(runningRec, 0), step(runningRec, 1, { status: 'running', costMicros: 0, finishedAt: null })]);
const succeededRec = record({
  status: 'succeeded',
  chargedMicros: 2000,
  startedAt: T1,
  finishedAt: T2,
  output: { artifacts: [artifact()], durationSeconds: 2 },
});
const succeeded = publicExecution(succeededRec, [step(succeededRec, 0), step(succeededRec, 1)]);
const failedRec = record({
  status: 'failed',
  chargedMicros: 1000,
  startedAt: T1,
  finishedAt: T2,
  errorCode: 'provider_error',
  errorMessage: 'the provider failed',
});
const failed = publicExecution(failedRec, [step(failedRec, 0), step(failedRec, 1, { status: 'failed', costMicros: 0 })]);
const cancelRequested = publicExecution({ ...runningRec, cancelRequested: true }, [
  step(runningRec, 0, { status: 'running', finishedAt: null, costMicros: 0 }),
]);

function headers(extra: ResponseHeaders = {}, authenticated = true): ResponseHeaders {
  return {
    'cache-control': 'no-store',
    'content-type': 'application/json; charset=utf-8',
    'x-request-id': '2b0c4d0e-8f3a-4d5e-9b7a-1c2d3e4f5a6b',
    ...(authenticated ? { 'ratelimit-limit': '120', 'ratelimit-remaining': '117', 'ratelimit-reset': '42', 'ratelimit-policy': '120;w=60' } : {}),
    ...extra,
  };
}

/** The error body exactly as app.ts writes it, with the HTTP status from errors.ts. */
function errorOf(code: ErrorCode, details?: Obj): { status: number; body: Obj } {
  const { http, status } = httpFor(code);
  return { status: http, body: { error: { status, message: code, ...(details ? { details } : {}) } } };
}

const project = {
  organization: { id: newId('org'), name: 'Test org' },
  project: { id: newId('prj'), name: 'Test project' },
  key: { id: newId('key'), name: 'ci', scopes: ['project:read', 'usage:read', 'tools:read', 'tools:execute', 'executions:read'], role: 'ADMIN' },
  balance: { availableMicros: 998_000, reservedMicros: 2000, currency: 'usd' },
  monthlyCapMicros: null,
};
const usage = {
  period: { start: '2026-11-01T00:00:00.000Z', end: '2026-12-01T00:00:00.000Z' },
  requestCount: 12,
  executionCount: 3,
  chargedMicros: 6000,
  reservedMicros: 2000,
  currency: 'usd',
  monthlyCapMicros: 50_000_000,
  remainingCapMicros: 49_992_000,
};

describe('OpenApiValidator accepts real responses', () => {
  const ok = (method: string, path: string, status: number, body: unknown, h: ResponseHeaders = headers()) =>
    expect(validator.validate(method, path, status, h, body)).toEqual([]);

  it('project and usage', () => {
    ok('GET', '/tools/project', 200, { data: project });
    ok('GET', '/tools/project', 200, { data: { ...project, key: { ...project.key, scopes: ['project:read'], role: 'MEMBER' }, monthlyCapMicros: 1_000_000 } });
    ok('GET', '/tools/usage', 200, { data: usage });
    ok('GET', '/tools/usage', 200, { data: { ...usage, monthlyCapMicros: null, remainingCapMicros: null } });
  });

  it('the catalog as Catalog.describe builds it, priced and partly unpriced', () => {
    ok('GET', '/tools', 200, { data: catalog.describe(DEFAULT_PRICE_LIST, VERSION, true) });
    const partial: PriceList = { currency: 'usd', tools: { 'test.sleep': DEFAULT_PRICE_LIST.tools['test.sleep']! } };
    const described = catalog.describe(partial, VERSION, false) as { tools: { price: unknown; models: { price: unknown }[] }[] };
    expect(described.tools.some((t) => t.price === null && t.models.every((m) => m.price === null))).toBe(true);
    ok('GET', '/tools', 200, { data: described });
  });

  it('quotes as Catalog.quote builds them', () => {
    ok('POST', '/tools/quote', 200, {
      data: catalog.quote(catalog.resolve('test.sleep', { seconds: 1, steps: 3, costMicrosPerStep: 7 }), DEFAULT_PRICE_LIST, VERSION),
    });
    ok('POST', '/tools/quote', 200, {
      data: catalog.quote(catalog.resolve('image.render', { text: 'Hello', width: 1200, height: 900, format: 'png' }), DEFAULT_PRICE_LIST, VERSION),
    });
  });

  it('executions as publicExecution builds them, in every route that returns one', () => {
    const accepted = publicExecution(queued, []);
    const location = `/tools/executions/${queued.id}`;
    ok('POST', '/tools/test.sleep', 202, { data: accepted }, headers({ 'retry-after': '5', location }));
    ok(
      'POST',
      '/tools/test.sleep',
      202,
      { data: running },
      headers({ 'retry-after': '5', location: `/tools/executions/${runningRec.id}`, 'idempotent-replayed': 'true' }),
    );
    ok('POST', '/tools/image.render', 200, { data: succeeded }, headers({ 'idempotent-replayed': 'true' }));
    for (const e of [accepted, running, succeeded, failed, cancelRequested]) ok('GET', `/tools/executions/${e.id}`, 200, { data: e });
    ok('POST', `/tools/executions/${queued.id}/cancel`, 200, { data: publicExecution({ ...queued, status: 'cancelled', finishedAt: T1 }, []) });
    ok('POST', `/tools/executions/${runningRec.id}/cancel`, 202, { data: cancelRequested });
  });

  it('a queued execution with its place in line, with and without an estimated start', () => {
    const waiting = publicExecution(queued, [], { queuePosition: 3, estimatedStartAt: '2026-11-26T15:00:04.000Z' });
    expect(waiting.progress).toEqual({ completedSteps: 0, totalSteps: 2, currentStep: null, queuePosition: 3, estimatedStartAt: '2026-11-26T15:00:04.000Z' });
    ok('GET', `/tools/executions/${queued.id}`, 200, { data: waiting });
    ok('GET', `/tools/executions/${queued.id}`, 200, { data: publicExecution(queued, [], { queuePosition: 1, estimatedStartAt: null }) });
    ok('GET', '/tools/executions', 200, { data: [waiting], hasMore: false, nextBefore: null });
    // a place read just before a claim is not shown on the running execution
    expect(publicExecution(runningRec, [], { queuePosition: 1, estimatedStartAt: null }).progress).not.toHaveProperty('queuePosition');
    // position 0 or a time of another form is not what the document promises
    const rejected = (body: unknown) => validator.validate('GET', `/tools/executions/${queued.id}`, 200, headers(), body);
    expect(rejected({ data: publicExecution(queued, [], { queuePosition: 0, estimatedStartAt: null }) })).toHaveLength(1);
    expect(rejected({ data: publicExecution(queued, [], { queuePosition: 2, estimatedStartAt: '2026-11-26 15:00' }) }).length).toBeGreaterThan(0);
  });

  it('execution lists, with a query string', () => {
    ok('GET', '/tools/executions', 200, { data: [], hasMore: false, nextBefore: null });
    ok('GET', `/tools/executions?limit=2&status=succeeded&tool=test.sleep`, 200, { data: [succeeded, failed], hasMore: true, nextBefore: failed.id });
  });

  it('downloads and uploads', () => {
    const a = (succeeded.output as { artifacts: { id: string }[] }).artifacts[0]!;
    ok('GET', `/tools/executions/${succeeded.id}/artifacts/${a.id}/download`, 200, {
      data: {
        url: 'http://127.0.0.1:9000/bucket/artifacts/x.txt?X-Amz-Expires=300&X-Amz-Signature=abc',
        expiresAt: T2,
        mimeType: 'text/plain',
        sizeBytes: 31,
        sha256: SHA,
      },
    });
    const image = { kind: 'image', width: 640, height: 480 };
    ok('POST', '/tools/upload', 200, {
      data: { id: newId('file'), format: 'png', mimeType: 'image/png', sizeBytes: 1234, sha256: SHA, facts: image, expiresAt: T2 },
    });
    const audio = { codec: 'pcm_s16le', sampleRate: 22050, channels: 1, decodedSeconds: 3.3 };
    const wav = { kind: 'media', durationSeconds: 3.3, video: null, audio };
    ok('POST', '/tools/upload', 200, {
      data: { id: newId('file'), format: 'wav', mimeType: 'audio/wav', sizeBytes: 12 * 1024 * 1024, sha256: SHA, facts: wav, expiresAt: T2 },
    });
    const video = { codec: 'h264', width: 320, height: 240, durationSeconds: 3, frameRate: 25 };
    const mp4 = { kind: 'media', durationSeconds: 3, video, audio: { ...audio, codec: 'aac' } };
    ok('POST', '/tools/upload', 200, {
      data: { id: newId('file'), format: 'mp4', mimeType: 'video/mp4', sizeBytes: 9, sha256: SHA, facts: mp4, expiresAt: T2 },
    });
    // stored by a gateway without ffprobe: no facts
    ok('POST', '/tools/upload', 200, {
      data: { id: newId('file'), format: 'mp3', mimeType: 'audio/mpeg', sizeBytes: 9, sha256: SHA, facts: null, expiresAt: T2 },
    });
  });

  it('the document itself, without authentication', () => {
    ok('GET', '/openapi.json', 200, doc, headers({}, false));
  });

  it('errors as app.ts writes them', () => {
    const unauth = errorOf('platform_api_key_missing');
    for (const op of operations.filter(needsAuth)) {
      const path = op.template.replace('{tool}', 'test.sleep').replace('{id}', queued.id).replace('{artifactId}', newId('art'));
      ok(op.method, path, unauth.status, unauth.body, headers({}, false));
      const forbidden = errorOf('platform_api_key_scope_required', { requiredScope: op.operation['x-required-scope'] });
      ok(op.method, path, forbidden.status, forbidden.body);
      const rate = errorOf('rate_limit_exceeded');
      ok(op.method, path, rate.status, rate.body, headers({ 'retry-after': '17' }));
      const notFound = errorOf('route_not_found');
      ok(op.method, path, notFound.status, notFound.body);
      for (const code of ['internal_error', 'service_unavailable'] as const) ok(op.method, path, httpFor(code).http, errorOf(code).body, headers({}, false));
    }
    const cases: [string, string, ErrorCode, Obj?][] = [
      ['POST', '/tools/quote', 'invalid_json'],
      [
        'POST',
        '/tools/quote',
        'invalid_arguments',
        { errors: [{ instancePath: '/width', keyword: 'maximum', message: 'must be <= 4096', params: { limit: 4096 } }] },
      ],
      ['POST', '/tools/quote', 'tool_not_found', { tool: 'nope' }],
      ['POST', '/tools/quote', 'request_too_large', { limitBytes: 65536 }],
      ['POST', '/tools/test.sleep', 'idempotency_key_required'],
      ['POST', '/tools/test.sleep', 'tool_mismatch', { pathTool: 'test.sleep', bodyTool: 'image.render' }],
      ['POST', '/tools/test.sleep', 'price_version_mismatch', { currentPriceVersion: VERSION }],
      ['POST', '/tools/test.sleep', 'maximum_charge_insufficient', { requiredMaximumChargeMicros: 2000 }],
      ['POST', '/tools/test.sleep', 'idempotency_key_reused'],
      ['POST', '/tools/test.sleep', 'insufficient_balance', { requiredMicros: 2000, availableMicros: 0, retryable: false }],
      ['POST', '/tools/test.sleep', 'monthly_cap_exceeded', { requiredMicros: 2000, retryable: false }],
      ['POST', '/tools/test.sleep', 'execution_disabled'],
      ['POST', '/tools/executions', 'tool_not_found', { tool: 'executions' }],
      ['POST', '/tools/upload', 'file_content_mismatch'],
      ['GET', '/tools/executions?limit=0', 'invalid_request', { parameter: 'status' }],
      ['GET', `/tools/executions/${queued.id}`, 'execution_not_found'],
      ['POST', `/tools/executions/${queued.id}/cancel`, 'execution_not_cancellable', { status: 'succeeded' }],
      ['POST', `/tools/executions/${queued.id}/cancel`, 'execution_cancel_not_allowed'],
      ['GET', `/tools/executions/${queued.id}/artifacts/${newId('art')}/download`, 'artifact_expired'],
    ];
    // rejected before authentication: no RateLimit-* headers
    ok('GET', '/tools', 429, errorOf('rate_limit_exceeded', { reason: 'too many failed authentications' }).body, headers({ 'retry-after': '30' }, false));
    ok('POST', '/tools/quote', 413, errorOf('request_too_large', { limitBytes: 65536 }).body, headers({}, false));
    ok('POST', '/tools/quote', 400, errorOf('invalid_json').body, headers({}, false));
    for (const [method, path, code, details] of cases) {
      const e = errorOf(code, details);
      ok(method, path, e.status, e.body);
    }
  });

  it('a 404 route_not_found for a path the document does not list', () => {
    const e = errorOf('route_not_found');
    ok('GET', '/nope', 404, e.body, headers({}, false));
    ok('DELETE', `/tools/executions/${queued.id}/x`, 404, e.body);
  });

  it('a 405 method_not_allowed with Allow for a method a listed path does not take', () => {
    const e = (allowedMethods: string[]) => errorOf('method_not_allowed', { allowedMethods });
    ok('DELETE', `/tools/executions/${queued.id}`, 405, e(['GET', 'HEAD']).body, headers({ allow: 'GET, HEAD' }));
    ok('PUT', '/tools/quote', 405, e(['GET', 'HEAD', 'POST']).body, headers({ allow: 'GET, HEAD, POST' }));
    ok('OPTIONS', '/openapi.json', 405, e(['GET', 'HEAD']).body, headers({ allow: 'GET, HEAD' }, false));
  });
});

describe('OpenApiValidator rejects', () => {
  const problems = (method: string, path: string, status: number, body: unknown, h: ResponseHeaders = headers()) =>
    validator.validate(method, path, status, h, body);

  it('a field of the wrong type', () => {
    const p = problems('GET', `/tools/executions/${queued.id}`, 200, { data: { ...succeeded, reservedMicros: '2000' } });
    expect(p).toEqual([expect.stringMatching(/reservedMicros must be integer/)]);
    expect(problems('GET', '/tools/usage', 200, { data: { ...usage, chargedMicros: 1.5 } })).toHaveLength(1);
    expect(problems('GET', '/tools/usage', 200, { data: { ...usage, chargedMicros: -1 } })).toHaveLength(1);
    expect(problems('GET', '/tools', 200, { data: { ...(catalog.describe(DEFAULT_PRICE_LIST, VERSION, true) as Obj), executionEnabled: 'yes' } })).toHaveLength(
      1,
    );
  });

  it('a missing required field, and a field the document does not know', () => {
    const { chargedMicros: _dropped, ...withoutCharge } = succeeded;
    expect(problems('GET', `/tools/executions/${queued.id}`, 200, { data: withoutCharge })).toEqual([
      expect.stringMatching(/must have required property 'chargedMicros'/),
    ]);
    expect(problems('GET', '/tools/executions', 200, { data: [] })).toEqual([expect.stringMatching(/hasMore/)]);
    expect(problems('GET', `/tools/executions/${queued.id}`, 200, { data: { ...succeeded, secret: 'x' } })).toEqual([
      expect.stringMatching(/additional properties/),
    ]);
    const noArtifacts = { ...succeeded, output: { durationSeconds: 2 } };
    expect(problems('GET', `/tools/executions/${queued.id}`, 200, { data: noArtifacts })).toEqual([expect.stringMatching(/artifacts/)]);
  });

  it('an undocumented status', () => {
    expect(problems('GET', '/tools', 201, { data: {} })).toEqual([expect.stringMatching(/status 201 is not documented/)]);
    expect(problems('GET', `/tools/executions/${queued.id}`, 409, errorOf('idempotency_key_reused').body)).toEqual([
      expect.stringMatching(/status 409 is not documented/),
    ]);
    expect(problems('GET', '/nope', 200, {}, headers({}, false))).toEqual([expect.stringMatching(/no path template/)]);
    // a known path with a method it does not take: 405 with Allow, not 404
    expect(problems('PUT', '/tools/quote', 404, errorOf('route_not_found').body)).toEqual([expect.stringMatching(/may only answer 405/)]);
    expect(problems('PUT', '/tools/quote', 405, errorOf('method_not_allowed', { allowedMethods: ['GET', 'HEAD', 'POST'] }).body)).toEqual([
      expect.stringMatching(/Allow is missing/),
    ]);
    const strict = new OpenApiValidator(doc, { strictOperations: true });
    expect(strict.validate('GET', '/nope', 404, headers({}, false), errorOf('route_not_found').body)).toHaveLength(1);
  });

  it('a wrong error code or status for the HTTP status and route', () => {
    expect(problems('GET', '/tools', 401, { error: { status: 'UNAUTHENTICATED', message: 'route_not_found' } }, headers({}, false))).toHaveLength(1);
    expect(problems('GET', '/tools', 404, errorOf('execution_not_found').body)).toHaveLength(1);
    expect(problems('POST', '/tools/quote', 400, errorOf('idempotency_key_required').body)).toHaveLength(1);
    expect(problems('POST', '/tools/test.sleep', 400, { error: { status: 'FAILED_PRECONDITION', message: 'invalid_json' } })).toHaveLength(1);
    expect(problems('POST', '/tools/test.sleep', 400, { error: { status: 'INVALID_ARGUMENT', message: 'invalid_json', stack: 'at x' } })).toHaveLength(1);
  });

  it('a response missing Cache-Control or with another value, whatever the header case', () => {
    const { 'cache-control': _c, ...rest } = headers() as Record<string, string>;
    expect(problems('GET', '/tools/usage', 200, { data: usage }, rest)).toEqual([expect.stringMatching(/Cache-Control is missing/)]);
    expect(problems('GET', '/tools/usage', 200, { data: usage }, { ...rest, 'Cache-Control': 'no-store' })).toEqual([]);
    expect(problems('GET', '/tools/usage', 200, { data: usage }, { ...rest, 'cache-control': 'public, max-age=60' })).toHaveLength(1);
  });

  it('other missing or wrong headers', () => {
    const accepted = { data: publicExecution(queued, []) };
    expect(problems('GET', '/tools', 429, errorOf('rate_limit_exceeded').body)).toEqual([expect.stringMatching(/Retry-After is missing/)]);
    // a 200 to a submit is a replay (Idempotent-Replayed) or an execution that ended within Prefer: wait (no header)
    expect(problems('POST', '/tools/test.sleep', 200, { data: succeeded })).toEqual([]);
    expect(problems('POST', '/tools/test.sleep', 202, accepted)).toEqual([
      expect.stringMatching(/Retry-After is missing/),
      expect.stringMatching(/Location is missing/),
    ]);
    const { 'ratelimit-limit': _l, ...noLimit } = headers() as Record<string, string>;
    expect(problems('GET', '/tools/usage', 200, { data: usage }, noLimit)).toEqual([expect.stringMatching(/RateLimit-Limit is missing/)]);
    const lenient = new OpenApiValidator(doc, { ignoreMissingHeaders: ['ratelimit-limit'] });
    expect(lenient.validate('GET', '/tools/usage', 200, noLimit, { data: usage })).toEqual([]);
    expect(problems('GET', '/tools/usage', 200, { data: usage }, headers({ 'ratelimit-remaining': 'many' }))).toHaveLength(1);
    expect(problems('GET', '/tools/usage', 200, { data: usage }, headers({ 'content-type': 'text/html' }))).toEqual([
      expect.stringMatching(/Content-Type text\/html/),
    ]);
  });

  it('assertValid throws an Error listing the problems', () => {
    expect(() => validator.assertValid('GET', '/tools', 201, headers(), {})).toThrow(/status 201 is not documented/);
    expect(() => validator.assertValid('GET', '/tools/usage', 200, headers(), { data: usage })).not.toThrow();
  });
});

describe('path matching', () => {
  it('concrete paths win over /tools/{tool}, and a concrete path without the method falls through', () => {
    const id = (m: string, p: string) => validator.findOperation(m, p)?.operation.operationId;
    expect(id('POST', '/tools/quote')).toBe('createQuote');
    expect(id('POST', '/tools/upload')).toBe('uploadFile');
    expect(id('POST', '/tools/image.render')).toBe('submitExecution');
    expect(id('POST', '/tools/executions')).toBe('submitExecution');
    expect(id('GET', '/tools/executions?limit=5')).toBe('listExecutions');
    expect(id('GET', '/tools/project')).toBe('getProject');
    expect(id('GET', '/tools/usage')).toBe('getUsage');
    expect(id('GET', '/tools/')).toBe('listTools');
    expect(id('GET', '/tools/image.render')).toBe('getTool');
    expect(id('GET', '/tools/quote')).toBe('getTool');
    expect(id('PUT', '/tools/image.render')).toBeUndefined();
    expect(id('POST', `/tools/executions/${queued.id}/cancel`)).toBe('cancelExecution');
    expect(id('GET', `/tools/executions/${queued.id}/artifacts/art_x/download`)).toBe('getArtifactDownload');
    expect(id('GET', '/openapi.json')).toBe('getOpenApiDocument');
  });
});
