import { generateKeySecret } from '@tes/core';
import { createLogger, logFields } from '@tes/observability';
import { CaptureTransport } from '@tes/testing';

const SECRET = generateKeySecret().secret;
const withoutTime = (line: string | undefined) => line?.replace(/"timestamp":"[^"]+"/, '"timestamp":"T"');

/** The same call through winston (logger.log) and through logFields, each to its own capture. */
function both(level: string, message: string, fields: Record<string, string | number | boolean | undefined>, loggerLevel = 'info') {
  const viaWinston = new CaptureTransport();
  const viaFields = new CaptureTransport();
  createLogger({ service: 'gateway', level: loggerLevel, transports: [viaWinston] }).log(level, message, fields);
  logFields(createLogger({ service: 'gateway', level: loggerLevel, transports: [viaFields] }), level, message, fields);
  return { winston: viaWinston, fields: viaFields };
}

describe('logFields (the access log line without winston stream and formats)', () => {
  it('writes the very line logger.log writes: same keys, sorted, same numbers and escapes', () => {
    const fields = {
      requestId: 'c0a8e7f4-6c1b-4f0e-9d1e-0f5b8d7c6a5b',
      method: 'GET',
      route: '/tools/executions/{id}',
      status: 200,
      durationMs: 1.3,
      keyId: 'key_01M84EW15AMJ388847A1H1NE33',
      bytesSent: 0,
      errorCode: undefined,
      aborted: true,
      note: 'quote " backslash \\ newline \n lone \ud800 é',
    };
    const { winston, fields: fast } = both('info', 'gateway.http.request', fields);
    expect(fast.lines).toHaveLength(1);
    expect(withoutTime(fast.lines[0])).toBe(withoutTime(winston.lines[0]));
    const record = JSON.parse(fast.lines[0]!) as Record<string, unknown>;
    expect(Object.keys(record)).toEqual([...Object.keys(record)].sort());
    expect(record).not.toHaveProperty('errorCode');
    expect(record.timestamp).toEqual(expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/));
    // the record a capture keeps has the fields too, as winston's info has
    expect(fast.records[0]).toMatchObject({ level: 'info', message: 'gateway.http.request', route: '/tools/executions/{id}', service: 'gateway' });
  });

  it('redacts as the logger does: secret field names, keys, bearer tokens and presigned URLs in text', () => {
    const fields = {
      token: 'opaque',
      Authorization: 'x',
      note: `key ${SECRET} and Bearer abc.def and https://s3/x?X-Amz-Signature=ff`,
    };
    const { winston, fields: fast } = both('warn', `failed for ${SECRET}`, fields);
    expect(withoutTime(fast.lines[0])).toBe(withoutTime(winston.lines[0]));
    expect(fast.text()).not.toContain(SECRET);
    expect(fast.text()).not.toContain('abc.def');
    expect(fast.text()).not.toContain('X-Amz-Signature');
    expect(JSON.parse(fast.lines[0]!)).toMatchObject({ token: '[redacted]', Authorization: '[redacted]' });
  });

  it('honours the logger level, a transport level and a silent logger', () => {
    expect(both('info', 'e', { a: 1 }, 'warn').fields.lines).toHaveLength(0);
    expect(both('error', 'e', { a: 1 }, 'warn').fields.lines).toHaveLength(1);
    const quiet = new CaptureTransport({ level: 'error' });
    const loud = new CaptureTransport();
    logFields(createLogger({ service: 's', level: 'debug', transports: [quiet, loud] }), 'info', 'e', {});
    expect([quiet.lines.length, loud.lines.length]).toEqual([0, 1]);
    const silent = new CaptureTransport();
    logFields(createLogger({ service: 's', transports: [silent], silent: true }), 'error', 'e', {});
    expect(silent.lines).toHaveLength(0);
  });

  it('a field named like one the record owns goes through logger.log, which merges it its own way', () => {
    const { winston, fields: fast } = both('info', 'gateway.x', { message: 'extra' });
    expect(withoutTime(fast.lines[0])).toBe(withoutTime(winston.lines[0]));
    expect(JSON.parse(fast.lines[0]!)).toMatchObject({ message: 'gateway.x extra' });
  });
});
