import net from 'node:net';
import { bearer, useStack } from '../stack';

/**
 * Every answer carries the envelope, including the ones Express never sees: requests
 * Node's HTTP parser refuses (sent here byte for byte over raw sockets, since no HTTP
 * client will write them) and methods a known path does not take.
 */
const stack = useStack({ worker: false, relay: false, audit: false });

interface RawResponse {
  status: number;
  reason: string;
  headers: Record<string, string>;
  body: string;
}

/** Sends `bytes` on a new connection and returns every response read until the server closes (or `waitMs`). */
function exchange(bytes: string, o: { head?: boolean; waitMs?: number } = {}): Promise<RawResponse[]> {
  const port = Number(new URL(stack.baseUrl).port);
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    const socket = net.connect({ host: '127.0.0.1', port }, () => socket.write(bytes));
    const done = () => {
      clearTimeout(timer);
      socket.destroy();
      try {
        resolve(parseResponses(Buffer.concat(chunks).toString('latin1'), o.head === true));
      } catch (err) {
        reject(err);
      }
    };
    const timer = setTimeout(done, o.waitMs ?? 3_000);
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('close', done);
    socket.on('error', () => undefined); // a reset after the answer is read is fine
  });
}

/** The responses in `text`, in order; the answer to a HEAD request has no body whatever its Content-Length. */
function parseResponses(text: string, head: boolean): RawResponse[] {
  const out: RawResponse[] = [];
  let rest = text;
  while (rest.length > 0) {
    const end = rest.indexOf('\r\n\r\n');
    if (end === -1) throw new Error(`incomplete response head: ${JSON.stringify(rest.slice(0, 200))}`);
    const [statusLine, ...lines] = rest.slice(0, end).split('\r\n');
    const m = /^HTTP\/1\.1 (\d{3}) (.*)$/.exec(statusLine ?? '');
    if (!m) throw new Error(`not a status line: ${JSON.stringify(statusLine)}`);
    const headers: Record<string, string> = {};
    for (const l of lines) {
      const i = l.indexOf(':');
      headers[l.slice(0, i).trim().toLowerCase()] = l.slice(i + 1).trim();
    }
    const length = head ? 0 : Number(headers['content-length'] ?? 0);
    const body = rest.slice(end + 4, end + 4 + length);
    if (Buffer.byteLength(body, 'latin1') < length) throw new Error(`truncated body: ${JSON.stringify(body)}`);
    out.push({ status: Number(m[1]), reason: m[2] ?? '', headers, body });
    rest = rest.slice(end + 4 + length);
  }
  return out;
}

/** The envelope, no-store, a request id and JSON on one raw response. */
function expectEnvelope(r: RawResponse | undefined, status: number, errorStatus: string, message: string): void {
  expect(r).toBeDefined();
  const parsed = JSON.parse(r!.body) as { error?: { status?: string; message?: string } };
  expect({ status: r!.status, error: parsed.error }).toEqual({ status, error: expect.objectContaining({ status: errorStatus, message }) });
  expect(r!.headers['cache-control']).toBe('no-store');
  expect(r!.headers['content-type']).toBe('application/json; charset=utf-8');
  expect(r!.headers['x-request-id']).toMatch(/^[A-Za-z0-9._:-]{1,128}$/);
}

describe("requests Node's HTTP parser refuses get the envelope, then the connection closes", () => {
  const cases: [string, string, number, string][] = [
    ['a malformed request line', 'GET /tools HTTP/1.1 extra\r\nHost: x\r\n\r\n', 400, 'invalid_request'],
    ['not HTTP at all', 'HELLO\r\n\r\n', 400, 'invalid_request'],
    ['a 20 KB header', `GET /tools HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`, 431, 'request_too_large'],
    [
      'two different Content-Lengths',
      'POST /tools/quote HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}',
      400,
      'invalid_request',
    ],
    ['a Content-Length that is not a number', 'POST /tools/quote HTTP/1.1\r\nHost: x\r\nContent-Length: 2x\r\n\r\n{}', 400, 'invalid_request'],
    [
      'Content-Length with Transfer-Encoding',
      'POST /tools/quote HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n',
      400,
      'invalid_request',
    ],
    [
      'a broken chunked body',
      'POST /tools/quote HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n',
      400,
      'invalid_request',
    ],
    ['a header name with a space', 'GET /tools HTTP/1.1\r\nHost: x\r\nBad Header: 1\r\n\r\n', 400, 'invalid_request'],
    ['HTTP/1.1 without Host', 'GET /tools HTTP/1.1\r\n\r\n', 400, 'invalid_request'],
    ['an Expect other than 100-continue', 'GET /tools HTTP/1.1\r\nHost: x\r\nExpect: something\r\nConnection: close\r\n\r\n', 417, 'invalid_request'],
  ];

  it.each(cases)('%s', async (_what, bytes, status, message) => {
    const responses = await exchange(bytes);
    expect(responses).toHaveLength(1);
    expectEnvelope(responses[0], status, 'INVALID_ARGUMENT', message);
    expect(responses[0]!.headers.connection).toBe('close');
    expect(Number(responses[0]!.headers['content-length'])).toBe(Buffer.byteLength(responses[0]!.body));
  });

  it('a body longer than its Content-Length: the excess is a malformed request, answered with the envelope', async () => {
    const responses = await exchange(
      'POST /tools/quote HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}GARBAGE GARBAGE\r\n\r\n',
    );
    expect(responses.length).toBeGreaterThanOrEqual(1);
    // whether the first request's own answer (401, no key) is still sent depends on timing;
    // every answer that is sent is enveloped, and the last one is the parser's 400
    for (const r of responses.slice(0, -1)) expectEnvelope(r, 401, 'UNAUTHENTICATED', 'platform_api_key_missing');
    expectEnvelope(responses[responses.length - 1], 400, 'INVALID_ARGUMENT', 'invalid_request');
  });

  it('a request id is generated for each refused request, never taken from its bytes', async () => {
    const [a] = await exchange('GET /tools HTTP/1.1 extra\r\nHost: x\r\nX-Request-Id: mine-1\r\n\r\n');
    const [b] = await exchange('GET /tools HTTP/1.1 extra\r\nHost: x\r\nX-Request-Id: mine-1\r\n\r\n');
    expect(a!.headers['x-request-id']).not.toBe('mine-1');
    expect(a!.headers['x-request-id']).not.toBe(b!.headers['x-request-id']);
  });
});

describe('methods a known path does not take: 405 with Allow and the envelope', () => {
  let secret: string;
  beforeAll(async () => {
    ({ secret } = await stack.seed());
  });

  const request = (method: string, path: string, headers: Record<string, string> = {}) =>
    `${method} ${path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n${Object.entries(headers)
      .map(([k, v]) => `${k}: ${v}\r\n`)
      .join('')}\r\n`;

  it('OPTIONS and other methods on authenticated paths, with a key', async () => {
    const cases: [string, string, string][] = [
      ['OPTIONS', '/tools', 'GET, HEAD'],
      ['DELETE', '/tools', 'GET, HEAD'],
      ['OPTIONS', '/tools/quote', 'GET, HEAD, POST'], // GET reaches GET /tools/{tool}
      ['PUT', '/tools/quote', 'GET, HEAD, POST'],
      ['PUT', '/tools/executions', 'GET, HEAD, POST'], // POST reaches POST /tools/{tool}
      ['PATCH', '/tools/executions/exe_01ARZ3NDEKTSV4RRFFQ69G5FAV', 'GET, HEAD'],
      ['GET', '/tools/executions/exe_01ARZ3NDEKTSV4RRFFQ69G5FAV/cancel', 'POST'],
      ['PUT', '/tools/image.render', 'GET, HEAD, POST'],
    ];
    for (const [method, path, allow] of cases) {
      const [r] = await exchange(request(method, path, bearer(secret)));
      expectEnvelope(r, 405, 'UNIMPLEMENTED', 'method_not_allowed');
      expect({ method, path, allow: r!.headers.allow }).toEqual({ method, path, allow });
      expect(r!.headers['ratelimit-limit']).toBe('120');
      expect(JSON.parse(r!.body).error.details).toEqual({ allowedMethods: allow.split(', ') });
    }
  });

  it('without a key, authenticated paths still answer 401 first', async () => {
    const [r] = await exchange(request('OPTIONS', '/tools'));
    expectEnvelope(r, 401, 'UNAUTHENTICATED', 'platform_api_key_missing');
  });

  it('public paths answer 405 without a key; HEAD of a POST-only path has no body', async () => {
    for (const [method, path] of [
      ['OPTIONS', '/openapi.json'],
      ['POST', '/docs'],
      ['DELETE', '/docs/init.js'],
      ['OPTIONS', '/docs/assets/swagger-ui.css'],
    ] as const) {
      const [r] = await exchange(request(method, path));
      expectEnvelope(r, 405, 'UNIMPLEMENTED', 'method_not_allowed');
      expect(r!.headers.allow).toBe('GET, HEAD');
    }
    const [head] = await exchange(request('HEAD', '/tools/executions/exe_01ARZ3NDEKTSV4RRFFQ69G5FAV/cancel', bearer(secret)), { head: true });
    expect(head!.status).toBe(405);
    expect(head!.headers.allow).toBe('POST');
    expect(head!.headers['cache-control']).toBe('no-store');
  });

  it('unknown paths stay 404 route_not_found, whatever the method', async () => {
    for (const [method, path] of [
      ['OPTIONS', '/nope'],
      ['DELETE', '/tools/a/b/c'],
      ['GET', '/tools/executions/x/y'],
    ] as const) {
      const [r] = await exchange(request(method, path, bearer(secret)));
      expectEnvelope(r, 404, 'NOT_FOUND', 'route_not_found');
      expect(r!.headers.allow).toBeUndefined();
    }
  });
});
