import { SseParser, type SseEvent } from '../src/sse';

/**
 * The Server-Sent Events parser against the HTML standard's rules, fed the same stream cut
 * at every possible place: the events must not depend on where the network split the bytes.
 */
const encoder = new TextEncoder();

function parseAll(chunks: (string | Uint8Array)[]): { events: SseEvent[]; parser: SseParser } {
  const parser = new SseParser();
  const events = chunks.flatMap((c) => parser.push(typeof c === 'string' ? encoder.encode(c) : c));
  parser.end();
  return { events, parser };
}

/** Every split of the bytes into two chunks, and one byte per chunk. */
function everySplit(text: string): Uint8Array[][] {
  const bytes = encoder.encode(text);
  const splits: Uint8Array[][] = [];
  for (let i = 0; i <= bytes.length; i++) splits.push([bytes.subarray(0, i), bytes.subarray(i)]);
  splits.push([...bytes].map((b) => Uint8Array.of(b)));
  return splits;
}

const STREAM =
  'retry: 1000\n\n' +
  ': keep-alive\n\n' +
  'event: execution\nid: 41\ndata: {"id":"exe_1","status":"queued"}\n\n' +
  'event: execution\nid: 42\ndata: {"id":"exe_1",\ndata: "status":"running","note":"ünïcødé ✓"}\n\n';

const EXPECTED: SseEvent[] = [
  { type: 'execution', lastEventId: '41', data: '{"id":"exe_1","status":"queued"}' },
  { type: 'execution', lastEventId: '42', data: '{"id":"exe_1",\n"status":"running","note":"ünïcødé ✓"}' },
];

describe('SseParser', () => {
  it('gives the same events wherever the bytes are cut, even inside a multi-byte character', () => {
    for (const chunks of everySplit(STREAM)) {
      const { events, parser } = parseAll(chunks);
      expect(events).toEqual(EXPECTED);
      expect(parser.retryMs).toBe(1000);
      expect(parser.comments).toBe(1);
    }
  });

  it('takes CRLF, CR and LF line endings alike, also with the CR and the LF in different chunks', () => {
    for (const eol of ['\r\n', '\r', '\n']) {
      const text = STREAM.replace(/\n/g, eol);
      for (const chunks of everySplit(text)) expect(parseAll(chunks).events).toEqual(EXPECTED);
    }
    // mixed in one stream
    expect(parseAll(['data: a\r\ndata: b\rdata: c\n\r\n']).events).toEqual([{ type: 'message', lastEventId: '', data: 'a\nb\nc' }]);
  });

  it('joins multi-line data with \\n, keeps empty data lines, and strips one leading space only', () => {
    const { events } = parseAll(['data:first\ndata:\ndata:  two spaces\ndata\n\n']);
    expect(events).toEqual([{ type: 'message', lastEventId: '', data: 'first\n\n two spaces\n' }]);
  });

  it('skips comments, unknown fields and events without data; the id persists until changed', () => {
    const { events } = parseAll([
      ':comment\n: another\nfoo: bar\nid: 7\nevent: execution\n\n', // no data: not dispatched, but the id counts
      'data: x\n\n',
      'id\ndata: y\n\n', // an id field with no value clears it
      'id: bad\0id\ndata: z\n\n', // an id with NUL is ignored
    ]);
    expect(events).toEqual([
      { type: 'message', lastEventId: '7', data: 'x' },
      { type: 'message', lastEventId: '', data: 'y' },
      { type: 'message', lastEventId: '', data: 'z' },
    ]);
  });

  it('honours retry: only when it is all digits', () => {
    const parser = new SseParser();
    parser.push('retry: 250\n\n');
    expect(parser.retryMs).toBe(250);
    parser.push('retry: 1e3\nretry: -5\nretry: 12ms\nretry:\n\n');
    expect(parser.retryMs).toBe(250);
  });

  it('drops a leading BOM, and an event the end of the stream cut off', () => {
    const bom = Uint8Array.of(0xef, 0xbb, 0xbf);
    const { events } = parseAll([bom.subarray(0, 2), bom.subarray(2), 'data: one\n\ndata: cut off\n']);
    expect(events).toEqual([{ type: 'message', lastEventId: '', data: 'one' }]);
    expect(parseAll(['data: no blank line at the end']).events).toEqual([]);
  });
});
