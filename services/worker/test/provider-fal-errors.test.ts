import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { GuardedHttp } from '@tes/outbound';
import { ReadFailed, type ProviderContext } from '../src/providers/common';
import { falPoll } from '../src/providers/fal';

/**
 * How fal's result URL tells a failed request from no answer. fal documents two failure
 * shapes (tests/provider-contracts/fal/error.json): request errors, { detail, error_type }
 * with the same type in X-Fal-Error-Type, and model errors, { detail: [typed errors] }.
 * Those are outcomes: the request failed, unbilled. Anything else on an error status is no
 * answer about the request, even with fal's X-Fal-Request-Id on it (fal's own front can
 * fail too), and the read is retried until the job's deadline.
 */
let server: http.Server;
let base: string;
/** What the result URL answers, per request id. */
const answers = new Map<string, { status: number; headers: Record<string, string>; body: string }>();

beforeAll(async () => {
  server = http.createServer((req, res) => {
    const m = /^\/fal-ai\/flux\/requests\/([^/]+)(\/status)?$/.exec(req.url ?? '');
    if (!m) return void res.writeHead(404).end();
    if (m[2]) {
      res.writeHead(200, { 'Content-Type': 'application/json' });
      return void res.end(JSON.stringify({ status: 'COMPLETED' }));
    }
    const a = answers.get(m[1]!)!;
    res.writeHead(a.status, a.headers);
    res.end(a.body);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

function context(): ProviderContext {
  return {
    http: new GuardedHttp({ allowPrivateNetworks: true }),
    baseUrls: { replicate: base, fal: base, openai: base },
    credentials: { fal: 'k' },
    jobTimeoutMs: 60_000,
    signal: AbortSignal.timeout(10_000),
  };
}

function poll(id: string, status: number, headers: Record<string, string>, body: unknown) {
  answers.set(id, { status, headers: { 'Content-Type': 'application/json', ...headers }, body: typeof body === 'string' ? body : JSON.stringify(body) });
  return falPoll(context(), 'fal-ai/flux/schnell', id, () => []);
}

it('a request error (X-Fal-Error-Type and error_type) is the failed outcome, named by its type', async () => {
  const r = await poll('r1', 504, { 'X-Fal-Error-Type': 'request_timeout' }, { detail: 'Request timed out', error_type: 'request_timeout' });
  expect(r).toEqual({ failed: expect.stringMatching(/HTTP 504.*request_timeout.*Request timed out/) });
});

it('error_type in the body alone is enough', async () => {
  const r = await poll('r2', 503, { 'X-Fal-Request-Id': 'r2' }, { detail: 'No runner', error_type: 'runner_scheduling_failure' });
  expect(r).toEqual({ failed: expect.stringMatching(/runner_scheduling_failure/) });
});

it('a model error (detail as typed errors) is the failed outcome', async () => {
  const detail = [{ loc: ['body', 'prompt'], msg: 'flagged', type: 'content_policy_violation', url: 'https://docs.fal.ai/errors#content_policy_violation' }];
  const r = await poll('r3', 422, { 'X-Fal-Retryable': 'false' }, { detail });
  expect(r).toEqual({ failed: expect.stringMatching(/HTTP 422.*content_policy_violation/) });
});

it.each([
  ['fal’s own front, with its request id but no error type', 500, { 'X-Fal-Request-Id': 'r4' }, { detail: 'Internal Server Error' }],
  ['a proxy page', 502, { 'Content-Type': 'text/html' }, '<html>bad gateway</html>'],
  [
    'an error type fal does not send on a 401',
    401,
    { 'X-Fal-Request-Id': 'r6', 'X-Fal-Error-Type': 'bad_request' },
    { detail: 'nope', error_type: 'bad_request' },
  ],
] as const)('%s is no answer: the read fails and the job is read again', async (_name, status, headers, body) => {
  const id = `x${status}`;
  await expect(poll(id, status, headers, body)).rejects.toBeInstanceOf(ReadFailed);
});
