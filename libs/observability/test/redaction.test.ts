import { generateKeySecret, newId } from '@tes/core';
import { createLogger, type Logger } from '@tes/observability';
import { CaptureTransport } from '@tes/testing';

/** A logger whose formatted output (what a transport would write) is kept for inspection. */
function capturing(): { log: Logger; capture: CaptureTransport; records: () => Record<string, unknown>[] } {
  const capture = new CaptureTransport();
  const log = createLogger({ service: 't', level: 'debug', transports: [capture] });
  return { log, capture, records: () => capture.lines.map((l) => JSON.parse(l) as Record<string, unknown>) };
}

const SECRET = generateKeySecret().secret;
const PRESIGNED =
  'http://127.0.0.1:4568/tes-artifacts/prj_1/art_1.png?X-Amz-Algorithm=AWS4-HMAC-SHA256' +
  '&X-Amz-Credential=S3RVER%2F20261121%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20261121T101530Z' +
  '&X-Amz-Expires=300&X-Amz-SignedHeaders=host&X-Amz-Signature=9f1c0ffee4d2b7a1e5c3a8f06d2e4b7c9a1f3e5d7b9c0a2e4f6a8b0c2d4e6f80';
const SIGNATURE = PRESIGNED.split('X-Amz-Signature=')[1]!;

describe('log redaction', () => {
  it('an API key secret never reaches a transport, in the message or nested in meta', () => {
    const { log, capture } = capturing();
    log.info(`auth failed for ${SECRET}`);
    log.warn('gateway.auth.failed', { request: { headers: { 'x-api-key': SECRET } }, attempts: [{ tried: `key=${SECRET};` }] });
    log.error('worker.step.failed', new Error(`provider said: ${SECRET} is wrong`));
    expect(capture.lines).toHaveLength(3);
    expect(capture.text()).not.toContain(SECRET);
    // the random part alone would be as bad as the whole secret
    expect(capture.text()).not.toContain(SECRET.slice(13));
    expect(capture.text()).toContain('[redacted-key]');
  });

  it('a bearer token in a header value or in text is replaced', () => {
    const { log, capture } = capturing();
    const token = 'eyJhbGciOiJIUzI1NiJ9.opaque-bearer-token-123';
    log.info('gateway.request', { headers: { 'x-forwarded-auth': `Bearer ${token}` } });
    log.info(`upstream replied 401 to "Authorization: bearer ${token}"`);
    expect(capture.text()).not.toContain(token);
    expect(capture.text()).toContain('Bearer [redacted]');
  });

  it('a presigned URL is removed wherever it appears', () => {
    const { log, capture } = capturing();
    log.info(`download ready at ${PRESIGNED} for 300 s`);
    log.info('gateway.download.presigned', { location: PRESIGNED, nested: { links: [PRESIGNED] } });
    log.info('gateway.download.presigned', { target: `"${PRESIGNED.replace('http://', 'HTTP://')}"` });
    expect(capture.text()).not.toContain(SIGNATURE);
    expect(capture.text()).not.toMatch(/X-Amz-Signature=/i);
    expect(capture.text()).not.toMatch(/X-Amz-Credential=/i);
    expect(capture.text()).toContain('[redacted-url]');
  });

  it.each(['authorization', 'Authorization', 'secret', 'url', 'data'])('a field named %s is redacted at any depth', (field) => {
    const { log, capture, records } = capturing();
    const value = `plain-looking-value-${field}`;
    log.info('event.top', { [field]: value });
    log.info('event.nested', { request: { headers: { [field]: value } } });
    log.info('event.array', { items: [{ [field]: { inner: value } }] });
    expect(capture.text()).not.toContain(value);
    const [top, nested, array] = records();
    expect(top?.[field]).toBe('[redacted]');
    expect(nested).toMatchObject({ request: { headers: { [field]: '[redacted]' } } });
    expect(array).toMatchObject({ items: [{ [field]: '[redacted]' }] });
  });

  it("a Buffer's bytes are never written, only its size", () => {
    const { log, capture, records } = capturing();
    const bytes = Buffer.from('\x89PNG private image content 0123456789');
    log.info('gateway.upload.stored', { file: bytes, parts: [bytes], deep: { chunk: bytes } });
    const text = capture.text();
    for (const leaked of [bytes.toString('latin1'), 'private image content', bytes.toString('base64'), bytes.toString('hex'), '[137,80,78,71']) {
      expect(text).not.toContain(leaked);
    }
    expect(text).not.toContain('"type":"Buffer"');
    expect(records()[0]).toMatchObject({ file: `[${bytes.length} bytes]`, parts: [`[${bytes.length} bytes]`], deep: { chunk: `[${bytes.length} bytes]` } });
  });

  it('an error keeps its message and stack, scrubbed', () => {
    const { log, records } = capturing();
    log.error('worker.step.failed', { err: new Error(`fetch ${PRESIGNED} with ${SECRET}`) });
    const err = records()[0]?.err as { name: string; message: string; stack: string };
    expect(err.name).toBe('Error');
    expect(err.message).toBe('fetch [redacted-url] with [redacted-key]');
    expect(err.stack).toContain('redaction.test.ts');
    expect(err.stack).not.toContain(SECRET);
    expect(err.stack).not.toContain(SIGNATURE);
  });

  it('ordinary fields pass through unchanged', () => {
    const { log, records } = capturing();
    const executionId = newId('exe');
    const projectId = newId('prj');
    const meta = { executionId, projectId, tool: 'image.render', step: { index: 2, costMicros: 1_500 }, cancelled: false, tags: ['a', 'b'] };
    log.info('worker.step.succeeded', meta);
    const [record] = records();
    expect(record).toMatchObject({ level: 'info', message: 'worker.step.succeeded', service: 't', ...meta });
    expect(record?.timestamp).toEqual(expect.any(String));
  });

  it('does not change the meta object the caller passed', () => {
    const { log } = capturing();
    const meta = { url: PRESIGNED, headers: { authorization: `Bearer ${SECRET}` }, file: Buffer.from('x') };
    log.info('gateway.request', meta);
    expect(meta.url).toBe(PRESIGNED);
    expect(meta.headers.authorization).toBe(`Bearer ${SECRET}`);
    expect(Buffer.isBuffer(meta.file)).toBe(true);
  });

  it('typed arrays are replaced by their size, like Buffers', () => {
    const { log, capture } = capturing();
    log.info('worker.file', { list: [new Uint8Array([104, 105, 33])], raw: new Uint8Array([1, 2]).buffer });
    expect(capture.text()).not.toMatch(/"0":104/);
    expect(capture.text()).toContain('[3 bytes]');
    expect(capture.text()).toContain('[2 bytes]');
  });

  it("redacts a copy: logging a single object leaves the caller's object as it was", () => {
    const { log, capture } = capturing();
    const record = { message: 'gateway.presigned', url: PRESIGNED, secret: SECRET };
    log.info(record);
    expect(record.url).toBe(PRESIGNED);
    expect(record.secret).toBe(SECRET);
    expect(capture.text()).not.toContain(SIGNATURE);
    expect(capture.text()).not.toContain(SECRET);
  });
});

describe('level filter', () => {
  it('a record below every transport level is dropped before it is redacted or serialised', () => {
    const capture = new CaptureTransport();
    const log = createLogger({ service: 't', level: 'info', transports: [capture] });
    let reads = 0;
    // serialisation calls toJSON; merging the meta into the record does not
    const meta = {
      payload: {
        toJSON() {
          reads += 1;
          return 'x';
        },
      },
    };
    log.log('http', 'gateway.http.request', meta);
    log.debug('worker.detail', meta);
    expect(reads).toBe(0);
    expect(capture.lines).toHaveLength(0);
    log.info('kept', meta);
    expect(capture.lines).toHaveLength(1);
    expect(reads).toBeGreaterThan(0);
  });
});
