import { createHash } from 'node:crypto';
import net from 'node:net';
import { bearer, startStack, type TestStack } from '../stack';
import { makeMedia } from '../media';

let stack: TestStack;
let secret: string;
let projectId: string;

beforeAll(async () => {
  stack = await startStack({ worker: false, relay: false });
  ({ secret, projectId } = await stack.seed());
});

afterAll(async () => {
  await stack?.stop();
});

function expectEnvelope(
  res: { status: number; headers: Record<string, string>; body: { error?: { status: string; message: string } }; text: string },
  http: number,
  message: string,
) {
  expect(res.status).toBe(http);
  expect(res.headers['cache-control']).toBe('no-store');
  expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
  expect(res.headers['x-request-id']).toBeTruthy();
  expect(res.text).not.toMatch(/<html|<!DOCTYPE|at .*\.ts:\d+/i);
  expect(res.body.error?.message).toBe(message);
}

/** A real 1x1 PNG (the upload is measured: magic bytes alone are refused), made distinct by bytes after its end. */
const PNG = Buffer.concat([
  Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==', 'base64'),
  Buffer.from('rest of a png'),
]);

describe('the envelope on every kind of bad request', () => {
  it('unknown paths: 404 route_not_found, with or without a key; wrong methods: 405 method_not_allowed with Allow', async () => {
    expectEnvelope(await stack.http().get('/nope'), 404, 'route_not_found');
    expectEnvelope(await stack.http().get('/tools/a/b/c').set(bearer(secret)), 404, 'route_not_found');
    const del = await stack.http().delete('/tools').set(bearer(secret));
    expectEnvelope(del, 405, 'method_not_allowed');
    expect(del.headers.allow).toBe('GET, HEAD');
    const put = await stack.http().put('/tools/executions').set(bearer(secret));
    expectEnvelope(put, 405, 'method_not_allowed');
    expect(put.headers.allow).toBe('GET, HEAD, POST');
  });

  it('malformed JSON, wrong content type, a non-object body', async () => {
    const bad = await stack
      .http()
      .post('/tools/quote')
      .set({ ...bearer(secret), 'Content-Type': 'application/json' })
      .send('{"tool": ');
    expectEnvelope(bad, 400, 'invalid_json');
    const text = await stack
      .http()
      .post('/tools/quote')
      .set({ ...bearer(secret), 'Content-Type': 'text/plain' })
      .send('hello');
    expectEnvelope(text, 400, 'unsupported_media_type');
    const arr = await stack.http().post('/tools/quote').set(bearer(secret)).send([1, 2]);
    expectEnvelope(arr, 400, 'invalid_request');
  });

  it('bodies over 64 KiB get 413 request_too_large', async () => {
    const res = await stack
      .http()
      .post('/tools/quote')
      .set(bearer(secret))
      .send({ tool: 'image.render', arguments: { text: 'x'.repeat(70_000) } });
    expectEnvelope(res, 413, 'request_too_large');
  });

  it('echoes a sane X-Request-Id and replaces an unsafe one', async () => {
    const ok = await stack
      .http()
      .get('/tools')
      .set({ ...bearer(secret), 'X-Request-Id': 'client-req-1' });
    expect(ok.headers['x-request-id']).toBe('client-req-1');
    const unsafe = await stack
      .http()
      .get('/tools')
      .set({ ...bearer(secret), 'X-Request-Id': 'bad id <script>' });
    expect(unsafe.headers['x-request-id']).not.toContain('<');
  });

  it('bad list queries are invalid_request', async () => {
    for (const q of ['limit=0', 'limit=101', 'limit=abc', 'status=done', 'before=exe_bad', 'limit=1&limit=2', 'extra=1']) {
      expectEnvelope(await stack.http().get(`/tools/executions?${q}`).set(bearer(secret)), 400, 'invalid_request');
    }
  });
});

it('serves the OpenAPI document without authentication', async () => {
  const res = await stack.http().get('/openapi.json');
  expect(res.status).toBe(200);
  expect(res.headers['cache-control']).toBe('no-store');
  expect(res.body.openapi).toBe('3.1.0');
  expect(Object.keys(res.body.paths)).toContain('/tools/{tool}');
});

it('serves an interactive reference at /docs from the same document, assets included', async () => {
  const page = await stack.http().get('/docs');
  expect(page.status).toBe(200);
  expect(page.headers['content-type']).toBe('text/html; charset=utf-8');
  expect(page.headers['cache-control']).toBe('no-store');
  expect(page.text).toContain('/docs/assets/swagger-ui-bundle.js');
  const init = await stack.http().get('/docs/init.js');
  expect(init.text).toContain("url: '/openapi.json'");
  const bundle = await stack.http().get('/docs/assets/swagger-ui-bundle.js');
  expect(bundle.status).toBe(200);
  expect(bundle.headers['cache-control']).toBe('no-store');
  const missing = await stack.http().get('/docs/assets/nope.js');
  expect(missing.status).toBe(404);
  expect(missing.body.error.message).toBe('route_not_found');
  const traversal = await stack.http().get('/docs/assets/..%2f..%2fpackage.json');
  expect(traversal.status).toBe(404);
});

it('lets no other site frame /docs, and nothing of it be sniffed into another type (issue #26)', async () => {
  for (const path of ['/docs', '/docs/init.js', '/docs/assets/swagger-ui-bundle.js', '/openapi.json']) {
    const res = await stack.http().get(path);
    expect([path, res.status]).toEqual([path, 200]);
    expect([path, res.headers['x-frame-options'], res.headers['x-content-type-options']]).toEqual([path, 'DENY', 'nosniff']);
    const csp = res.headers['content-security-policy']?.split('; ') ?? [];
    expect([path, csp]).toEqual([path, expect.arrayContaining(["default-src 'none'", "script-src 'self'", "frame-ancestors 'none'", "base-uri 'none'"])]);
    // no source but this origin may run scripts or be called (tests/browser renders the page under it)
    expect(csp.filter((d) => /^(script|connect)-src/.test(d))).toEqual(["script-src 'self'", "connect-src 'self'"]);
  }
});

it('lists executions through the project index, not a scan', async () => {
  await stack.db.raw('ANALYZE executions');
  // One connection, seq scans discouraged: the table is tiny here, and the question is
  // which index the planner can use, not which plan is cheapest on ten rows.
  const plans = await stack.db.transaction(async (trx) => {
    await trx.raw('SET LOCAL enable_seqscan = off');
    const out: string[] = [];
    for (const sql of [
      `SELECT id FROM executions WHERE project_id = 'prj_x' ORDER BY id DESC LIMIT 21`,
      `SELECT id FROM executions WHERE project_id = 'prj_x' AND status = 'succeeded' AND id < 'exe_z' ORDER BY id DESC LIMIT 21`,
      `SELECT id FROM executions WHERE project_id = 'prj_x' AND tool = 'test.sleep' ORDER BY id DESC LIMIT 21`,
    ]) {
      const res = await trx.raw(`EXPLAIN ${sql}`);
      out.push(res.rows.map((r: Record<string, string>) => r['QUERY PLAN']).join('\n'));
    }
    return out;
  });
  expect(plans[0]).toMatch(/Index (Only )?Scan.*executions_project_list_idx/);
  expect(plans[1]).toMatch(/executions_project_status_idx/);
  expect(plans[2]).toMatch(/executions_project_tool_idx/);
  for (const plan of plans) expect(plan).not.toMatch(/Seq Scan/);
});

describe('upload', () => {
  it('stores a file privately; identical content returns the same id and deadline', async () => {
    const data = PNG.toString('base64');
    const first = await stack.http().post('/tools/upload').set(bearer(secret)).send({ mimeType: 'image/png', data });
    expect(first.status).toBe(200);
    expect(first.body.data).toMatchObject({
      format: 'png',
      mimeType: 'image/png',
      sizeBytes: PNG.length,
      sha256: createHash('sha256').update(PNG).digest('hex'),
    });
    expect(first.body.data.id).toMatch(/^file_[0-9A-Z]{26}$/);
    const days = (Date.parse(first.body.data.expiresAt) - Date.now()) / 86_400_000;
    expect(days).toBeGreaterThan(29.9);
    expect(days).toBeLessThanOrEqual(30);
    await new Promise((r) => setTimeout(r, 20));
    const second = await stack.http().post('/tools/upload').set(bearer(secret)).send({ mimeType: 'image/png', data });
    expect(second.status).toBe(200);
    expect(second.body.data).toEqual(first.body.data);
    const rows = await stack.db('files').where({ project_id: projectId });
    expect(rows).toHaveLength(1);
    expect(rows[0].storage_key).toBe(`projects/${projectId}/uploads/${first.body.data.sha256}`);
  });

  it('accepts each format and the WAV aliases, measured; magic bytes alone are refused as file_content_mismatch', async () => {
    const samples: [string, Buffer, string, Buffer][] = [
      ['image/jpeg', await makeMedia.jpeg('32x16'), 'jpeg', Buffer.from([0xff, 0xd8, 0xff, 0xe0, 1, 2, 3])],
      ['audio/x-wav', await makeMedia.wav(1), 'wav', Buffer.concat([Buffer.from('RIFF'), Buffer.alloc(4), Buffer.from('WAVEfmt ')])],
      ['audio/mpeg', await makeMedia.mp3(1), 'mp3', Buffer.concat([Buffer.from('ID3'), Buffer.alloc(10)])],
      ['video/mp4', await makeMedia.mp4(1, '32x16'), 'mp4', Buffer.concat([Buffer.alloc(4), Buffer.from('ftypisom'), Buffer.alloc(8)])],
    ];
    for (const [mimeType, bytes, format, magicOnly] of samples) {
      const res = await stack
        .http()
        .post('/tools/upload')
        .set(bearer(secret))
        .send({ mimeType, data: bytes.toString('base64') });
      expect(res.status).toBe(200);
      expect(res.body.data.format).toBe(format);
      expect(res.body.data.facts).toMatchObject(format === 'jpeg' ? { kind: 'image', width: 32, height: 16 } : { kind: 'media' });
      const refused = await stack
        .http()
        .post('/tools/upload')
        .set(bearer(secret))
        .send({ mimeType, data: magicOnly.toString('base64') });
      expectEnvelope(refused, 400, 'file_content_mismatch');
    }
  });

  it('refuses bad uploads with their codes and stores nothing', async () => {
    const other = await stack.seed();
    const cases: [Record<string, unknown>, number, string][] = [
      [{ mimeType: 'image/gif', data: 'R0lGODlh' }, 400, 'unsupported_media_type'],
      [{ mimeType: 'image/png', data: 'not base64!!' }, 400, 'invalid_base64'],
      [{ mimeType: 'image/png', data: 'iVBORw0KGgo' }, 400, 'invalid_base64'], // bad padding
      [{ mimeType: 'image/png', data: '' }, 400, 'invalid_base64'],
      [{ mimeType: 'image/png', data: Buffer.from('GIF89a....').toString('base64') }, 400, 'file_content_mismatch'],
      [{ mimeType: 'image/png' }, 400, 'invalid_request'],
      [{ mimeType: 'image/png', data: 'AAAA', extra: 1 }, 400, 'invalid_request'],
    ];
    for (const [body, http, message] of cases) expectEnvelope(await stack.http().post('/tools/upload').set(bearer(other.secret)).send(body), http, message);
    expect(await stack.db('files').where({ project_id: other.projectId })).toHaveLength(0);
  });

  it('refuses more than 12 MiB decoded, and bodies past the upload limit with 413', async () => {
    const over = Buffer.concat([PNG, Buffer.alloc(12 * 1024 * 1024 - PNG.length + 3)]);
    expectEnvelope(
      await stack
        .http()
        .post('/tools/upload')
        .set(bearer(secret))
        .send({ mimeType: 'image/png', data: over.toString('base64') }),
      400,
      'file_too_large',
    );
    const huge = 'A'.repeat(17 * 1024 * 1024);
    expectEnvelope(await stack.http().post('/tools/upload').set(bearer(secret)).send({ mimeType: 'image/png', data: huge }), 413, 'request_too_large');
  });

  it('exactly 12 MiB is accepted', async () => {
    const exact = Buffer.concat([PNG, Buffer.alloc(12 * 1024 * 1024 - PNG.length, 7)]);
    const res = await stack
      .http()
      .post('/tools/upload')
      .set(bearer(secret))
      .send({ mimeType: 'image/png', data: exact.toString('base64') });
    expect(res.status).toBe(200);
    expect(res.body.data.sizeBytes).toBe(12 * 1024 * 1024);
  });
});

describe('upload slots', () => {
  /** An upload whose headers and first bytes are sent and whose body is then held back. */
  function heldUpload(key: string): Promise<net.Socket> {
    const url = new URL(stack.baseUrl);
    return new Promise((resolve, reject) => {
      const socket = net.connect(Number(url.port), url.hostname, () => {
        socket.write(
          `POST /tools/upload HTTP/1.1\r\nHost: ${url.host}\r\nAuthorization: Bearer ${key}\r\n` +
            `Content-Type: application/json\r\nContent-Length: 1000000\r\n\r\n{"mimeType":"image/png","data":"`,
        );
        // the gateway has taken the slot once it starts reading; give it a moment
        setTimeout(() => resolve(socket), 150);
      });
      socket.on('error', reject);
    });
  }

  const png = () => stack.http().post('/tools/upload');

  /** The access log writes its line when the response closes, a moment after the client has it. */
  async function waitFor<T>(find: () => T | undefined): Promise<T> {
    for (const deadline = Date.now() + 10_000; Date.now() < deadline; await new Promise((r) => setTimeout(r, 20))) {
      const found = find();
      if (found !== undefined) return found;
    }
    throw new Error('no such log line within 10 s');
  }

  it(`at most 2 uploads are read at once per process: one more gets 503 with Retry-After, nothing stored; a slot frees when a client goes away`, async () => {
    expect(stack.config.uploadConcurrency).toBe(2);
    const [a, b, c] = [await stack.seed(), await stack.seed(), await stack.seed()];
    const held = [await heldUpload(a.secret), await heldUpload(b.secret)];
    try {
      const refused = await png()
        .set(bearer(c.secret))
        .send({ mimeType: 'image/png', data: PNG.toString('base64') });
      expectEnvelope(refused, 503, 'service_unavailable');
      expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
      // what clients cause is no error of ours: its access-log line is at warn (issue #26)
      const line = await waitFor(() => stack.logs.records.find((r) => r.message === 'gateway.http.request' && r.requestId === refused.headers['x-request-id']));
      expect([line.level, line.status, line.errorCode]).toEqual(['warn', 503, 'service_unavailable']);
      expect(await stack.db('files').where({ project_id: c.projectId })).toHaveLength(0);
      // a caller without a key is refused before any slot or body read
      expectEnvelope(await png().send({ mimeType: 'image/png', data: PNG.toString('base64') }), 401, 'platform_api_key_missing');
    } catch (err) {
      for (const s of held) s.destroy(); // an open upload would keep the stack from stopping
      throw err;
    }
    held[0]!.destroy();
    // the aborted upload's slot is free again
    let after = await png()
      .set(bearer(c.secret))
      .send({ mimeType: 'image/png', data: PNG.toString('base64') });
    for (let i = 0; i < 20 && after.status === 503; i++) {
      await new Promise((r) => setTimeout(r, 50));
      after = await png()
        .set(bearer(c.secret))
        .send({ mimeType: 'image/png', data: PNG.toString('base64') });
    }
    expect(after.status).toBe(200);
    held[1]!.destroy();
  });

  it('one project cannot take every slot: its second upload waits its turn while another project is served', async () => {
    const [a, b] = [await stack.seed(), await stack.seed()];
    const held = await heldUpload(a.secret);
    try {
      const second = await png()
        .set(bearer(a.secret))
        .send({ mimeType: 'image/png', data: PNG.toString('base64') });
      expectEnvelope(second, 503, 'service_unavailable');
      expect(second.body.error.details.reason).toMatch(/this project already has 1 upload/);
      const other = await png()
        .set(bearer(b.secret))
        .send({ mimeType: 'image/png', data: PNG.toString('base64') });
      expect(other.status).toBe(200);
    } finally {
      held.destroy();
    }
  });

  it('a body trickled slower than the floor is cut within seconds with 400, and its slot is free again', async () => {
    const a = await stack.seed();
    const socket = await heldUpload(a.secret);
    const started = Date.now();
    const trickle = setInterval(() => socket.write('A'), 200); // 5 bytes/s
    const answer = await new Promise<string>((resolve) => {
      let text = '';
      socket.on('data', (d: Buffer) => (text += d.toString()));
      socket.on('close', () => resolve(text));
    });
    clearInterval(trickle);
    expect(Date.now() - started).toBeLessThan(6_000);
    expect(answer).toMatch(/^HTTP\/1\.1 400/);
    expect(answer).toMatch(/cache-control: no-store/i);
    expect(answer).toContain('"message":"invalid_request"');
    expect(answer).toMatch(/arrived slower than \d+ bytes\/s/);
    const after = await png()
      .set(bearer(a.secret))
      .send({ mimeType: 'image/png', data: PNG.toString('base64') });
    expect(after.status).toBe(200);
  });
});
