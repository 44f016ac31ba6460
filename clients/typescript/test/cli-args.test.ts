import { parseArgValue, parseArguments, parseFiles, parseIntegerOption, parsePath, UsageError } from '../src/cli/args';
import { describeFacts } from '../src/cli/commands';
import { describeError } from '../src/cli/describe-error';
import { pointerToPath } from '../src/error-words';
import { exampleCommand } from '../src/cli/describe-tool';
import { table, usd, wrap } from '../src/cli/format';
import { main } from '../src/cli/main';
import {
  detectMimeType,
  errorFromResponse,
  ExecutionUnsuccessfulError,
  IDEMPOTENCY_KEY_PATTERN,
  isValidIdempotencyKey,
  newIdempotencyKey,
  TesNetworkError,
} from '../src';
import { execution } from './fake-api';

function sink(isTTY = false): { write(s: string): void; isTTY: boolean; text: () => string } {
  const chunks: string[] = [];
  return { write: (s: string) => void chunks.push(s), isTTY, text: () => chunks.join('') };
}

async function cli(
  argv: string[],
  env: Record<string, string> = { TES_API_KEY: 'tes_abcdefgh_secretsecretsecretsecretsecret12', TES_URL: 'http://127.0.0.1:9' },
) {
  const stdout = sink();
  const stderr = sink();
  const code = await main(argv, env, { stdout, stderr, stdin: process.stdin });
  return { code, stdout: stdout.text(), stderr: stderr.text() };
}

describe('--arg values', () => {
  it('are JSON when they parse, else text', () => {
    expect(parseArgValue('800')).toBe(800);
    expect(parseArgValue('0.5')).toBe(0.5);
    expect(parseArgValue('true')).toBe(true);
    expect(parseArgValue('null')).toBe(null);
    expect(parseArgValue('{"width":1,"fit":"cover"}')).toEqual({ width: 1, fit: 'cover' });
    expect(parseArgValue('[0,1.5]')).toEqual([0, 1.5]);
    expect(parseArgValue('"2026"')).toBe('2026');
    expect(parseArgValue('Hello world')).toBe('Hello world');
    expect(parseArgValue('{not json')).toBe('{not json');
    expect(parseArgValue('')).toBe('');
  });

  it('split at the first "=", refuse duplicates, missing keys and prototype names', () => {
    expect(parseArguments(['text=a=b', 'width=64', 'svg=<svg width="1"/>'])).toEqual({ text: 'a=b', width: 64, svg: '<svg width="1"/>' });
    expect(parseArguments([])).toEqual({});
    for (const bad of [['noequals'], ['=1'], ['a=1', 'a=2'], ['__proto__={"x":1}']]) {
      expect(() => parseArguments(bad)).toThrow(UsageError);
    }
    expect(Object.getPrototypeOf(parseArguments(['constructor2=1']))).toBe(Object.prototype);
  });

  it('--file field=path, not clashing with an --arg of the same name', () => {
    expect(parseFiles(['fileId=./a.png', 'soundtrackFileId=b=c.wav'])).toEqual([
      { field: 'fileId', segments: ['fileId'], path: './a.png' },
      { field: 'soundtrackFileId', segments: ['soundtrackFileId'], path: 'b=c.wav' },
    ]);
    expect(() => parseFiles(['fileId=a.png'], { fileId: 'file_x' })).toThrow(/given twice/);
    expect(() => parseFiles(['fileId=a', 'fileId=b'])).toThrow(/given twice/);
    expect(() => parseFiles(['fileId='])).toThrow(/needs a path/);
  });

  it('paths reach into objects and array items, in order, without gaps or clashes', () => {
    expect(parsePath('slides[1].fileId', '--file')).toEqual(['slides', 1, 'fileId']);
    expect(parsePath('resize.width', '--arg')).toEqual(['resize', 'width']);
    expect(parsePath('a[0][2]', '--arg')).toEqual(['a', 0, 2]);
    for (const bad of ['[0]', '.a', 'a..b', 'a[x]', 'a[]', 'a.', 'a-b', 'a.__proto__', 'slides[0].constructor']) {
      expect(() => parsePath(bad, '--arg')).toThrow(UsageError);
    }
    expect(parseArguments(['slides[0].text=Hi', 'slides[0].seconds=2', 'slides[1].seconds=3', 'resize.width=256', 'resize.fit=cover'])).toEqual({
      slides: [{ text: 'Hi', seconds: 2 }, { seconds: 3 }],
      resize: { width: 256, fit: 'cover' },
    });
    // a whole value given by --arg, then reached into
    expect(parseArguments(['slides=[{"seconds":2}]', 'slides[0].text=Hi', 'slides[1].seconds=1'])).toEqual({
      slides: [{ seconds: 2, text: 'Hi' }, { seconds: 1 }],
    });
    expect(() => parseArguments(['slides[1].seconds=3'])).toThrow(/gap \(the array has 0 items so far\)/);
    expect(() => parseArguments(['text=Hi', 'text.size=3'])).toThrow(/already "Hi"/);
    expect(() => parseArguments(['slides={"a":1}', 'slides[0].seconds=1'])).toThrow(/is an object/);
    expect(() => parseArguments(['slides[0].seconds=1', 'slides[0].seconds=2'])).toThrow(/slides\[0\]\.seconds is given twice/);
    // files are checked against the arguments before anything is uploaded
    const args = parseArguments(['slides[0].text=Hi', 'slides[0].seconds=1', 'slides[1].seconds=2']);
    expect(parseFiles(['slides[1].fileId=frame.png', 'soundtrackFileId=a.wav'], args)).toEqual([
      { field: 'slides[1].fileId', segments: ['slides', 1, 'fileId'], path: 'frame.png' },
      { field: 'soundtrackFileId', segments: ['soundtrackFileId'], path: 'a.wav' },
    ]);
    expect(args).toEqual({ slides: [{ text: 'Hi', seconds: 1 }, { seconds: 2 }] }); // untouched until the uploads
    expect(() => parseFiles(['slides[3].fileId=x.png'], args)).toThrow(/gap/);
    expect(() => parseFiles(['slides[0].text=x.png'], args)).toThrow(/given twice/);
  });

  it('integer options are bounded', () => {
    expect(parseIntegerOption('20', '--limit', 1, 100)).toBe(20);
    expect(parseIntegerOption(undefined, '--limit', 1, 100)).toBeUndefined();
    for (const bad of ['0', '101', '1.5', '-3', 'ten', '']) expect(() => parseIntegerOption(bad, '--limit', 1, 100)).toThrow(UsageError);
  });
});

describe('CLI usage errors (exit 2, before any request)', () => {
  it('help is exit 0 on stdout; no command or an unknown one is exit 2', async () => {
    expect(await cli(['--help'])).toMatchObject({ code: 0, stdout: expect.stringContaining('tes <command>') });
    expect(await cli(['run', '--help'])).toMatchObject({ code: 0, stdout: expect.stringContaining('tes run TOOL') });
    // every command has its own help, naming each of its options
    for (const [command, words] of Object.entries({
      tools: ['NAME'],
      upload: ['FILE', '--type'],
      quote: ['--arg PATH=VALUE', '--file PATH=FILE', 'slides[1].fileId'],
      run: ['--yes', '--out', '--strategy', '--file PATH=FILE'],
      executions: ['--status', '--tool', '--limit', '--before'],
      execution: ['ID'],
      cancel: ['ID'],
      download: ['--out', 'sha256'],
      usage: ['--json'],
      project: ['--json'],
    })) {
      const help = await cli([command, '--help'], {});
      expect(help.code).toBe(0);
      for (const w of words) expect(help.stdout).toContain(w);
    }
    expect((await cli([])).code).toBe(2);
    expect(await cli(['frobnicate'])).toMatchObject({ code: 2, stderr: expect.stringContaining('unknown command') });
  });

  it('a missing key, a bad flag, a missing positional or a bad --limit', async () => {
    expect(await cli(['tools'], {})).toMatchObject({ code: 2, stderr: expect.stringContaining('TES_API_KEY is not set') });
    expect(await cli(['tools', '--bogus'])).toMatchObject({ code: 2, stderr: expect.stringContaining("Unknown option '--bogus'") });
    expect(await cli(['run'])).toMatchObject({ code: 2, stderr: expect.stringContaining('expected TOOL, got 0') });
    expect(await cli(['tools', 'a', 'b'])).toMatchObject({ code: 2, stderr: expect.stringContaining('expected [NAME], got 2') });
    expect(await cli(['upload'])).toMatchObject({ code: 2, stderr: expect.stringContaining('expected FILE') });
    expect(await cli(['upload', '/no/such/file.png'])).toMatchObject({ code: 2, stderr: expect.stringContaining('cannot read /no/such/file.png') });
    expect(await cli(['run', 'video.slideshow', '--file', 'slides[2].fileId=/etc/hostname', '--yes'])).toMatchObject({
      code: 2,
      stderr: expect.stringContaining('would leave a gap'),
    });
    expect(await cli(['quote', 'test.sleep', '--arg', 'steps'])).toMatchObject({ code: 2, stderr: expect.stringContaining('key=value') });
    const limit = await cli(['executions', '--limit', '500', '--json']);
    expect(limit.code).toBe(2);
    expect(JSON.parse(limit.stdout)).toEqual({ error: { code: 'usage', message: expect.stringContaining('--limit') } });
    expect((await cli(['executions', '--status', 'done'])).code).toBe(2);
  });

  it('a network failure is exit 1, in words (the code in --json), and never prints the key', async () => {
    const env = { TES_API_KEY: 'tes_abcdefgh_secretsecretsecretsecretsecret12', TES_URL: 'http://127.0.0.1:9' };
    const r = await cli(['usage', '--json'], env);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^tes usage: cannot reach the service: GET \/tools\/usage: no answer after \d attempts/);
    expect(JSON.parse(r.stdout).error.code).toBe('network_error');
    expect(r.stdout + r.stderr).not.toContain('secretsecret');
  }, 30_000);
});

describe('formatting', () => {
  it('money is integer micros shown with six decimals', () => {
    expect([usd(0), usd(10), usd(1_500), usd(2_000), usd(600_000), usd(1_000_000), usd(123_456_789), usd(-2_500), usd(null)]).toEqual([
      '$0.00',
      '$0.00001',
      '$0.0015',
      '$0.002',
      '$0.60',
      '$1.00',
      '$123.456789',
      '-$0.0025',
      'none',
    ]);
  });

  it('tables pad columns, amounts right-aligned; text wraps at words (the progress view: cli-progress.test.ts)', () => {
    expect(table(['A', 'BB'], [['xyz', '1']])).toBe('A    BB\nxyz  1\n');
    expect(
      table(
        ['T', 'CHARGED'],
        [
          ['a', '$0.60'],
          ['b', '$12.0015'],
        ],
        [1],
      ),
    ).toBe('T   CHARGED\na     $0.60\nb  $12.0015\n');
    expect(wrap('one two three four five six seven eight', 20)).toEqual(['one two three four', 'five six seven eight']);
  });

  it('upload facts: image size, media duration and streams, or whatever else the answer has', () => {
    expect(describeFacts({ kind: 'image', width: 640, height: 360 })).toBe('640×360');
    expect(
      describeFacts({
        kind: 'media',
        durationSeconds: 3.0133,
        video: { codec: 'h264', width: 320, height: 240, durationSeconds: 3, frameRate: 25 },
        audio: { codec: 'aac', sampleRate: 48000, channels: 2, decodedSeconds: 3 },
      }),
    ).toBe('3.01 s, video h264 320×240 25 fps, audio aac 48000 Hz 2 ch');
    expect(describeFacts({ kind: 'media', durationSeconds: 1.5, video: null, audio: { codec: 'pcm_s16le', sampleRate: 8000, channels: 1 } })).toBe(
      '1.5 s, audio pcm_s16le 8000 Hz 1 ch',
    );
    expect(describeFacts({ kind: 'other', pages: 3 })).toBe('pages 3');
    expect(describeFacts(null)).toBeUndefined();
    expect(describeFacts(undefined)).toBeUndefined();
  });

  it('an example as a command line: paths for nested values, --file for file ids, quoting for the shell', () => {
    expect(
      exampleCommand('video.slideshow', {
        slides: [
          { text: 'Quarterly update', seconds: 2 },
          { fileId: 'file_01ARZ3NDEKTSV4RRFFQ69G5FAV', seconds: 3 },
        ],
        soundtrackFileId: 'file_01ARZ3NDEKTSV4RRFFQ69G5FAV',
        width: 1280,
      }),
    ).toBe(
      "tes run video.slideshow --arg 'slides[0].text=Quarterly update' --arg slides[0].seconds=2 --file slides[1].fileId=picture.png " +
        '--arg slides[1].seconds=3 --file soundtrackFileId=sound.wav --arg width=1280',
    );
    expect(exampleCommand('image.transform', { fileId: 'file_01ARZ3NDEKTSV4RRFFQ69G5FAV', resize: { width: 256 }, note: "it's", year: '2026' })).toBe(
      `tes run image.transform --file fileId=picture.png --arg resize.width=256 --arg 'note=it'\\''s' --arg 'year="2026"'`,
    );
    expect(exampleCommand('video.thumbnail', { fileId: 'file_01ARZ3NDEKTSV4RRFFQ69G5FAV', times: [0, 1.5] })).toBe(
      'tes run video.thumbnail --file fileId=clip.mp4 --arg times=[0,1.5]',
    );
  });
});

describe('errors in words, once, with the amounts', () => {
  const api = (status: number, errorStatus: string, message: string, details?: object, headers: Record<string, string> = {}) =>
    errorFromResponse(
      status,
      { error: { status: errorStatus, message, ...(details ? { details } : {}) } },
      new Headers({ 'x-request-id': 'req_1', ...headers }),
    );

  it('names the amounts of the money refusals and the problems of invalid arguments', async () => {
    expect(
      await describeError(api(429, 'RESOURCE_EXHAUSTED', 'insufficient_balance', { requiredMicros: 2000, availableMicros: 1500, retryable: false })),
    ).toEqual(['insufficient balance: this needs $0.002, $0.0015 is available']);
    expect(await describeError(api(429, 'RESOURCE_EXHAUSTED', 'monthly_cap_exceeded', { requiredMicros: 600_000 }))).toEqual([
      'monthly cap reached: this needs $0.60',
    ]);
    expect(await describeError(api(400, 'FAILED_PRECONDITION', 'maximum_charge_insufficient', { requiredMaximumChargeMicros: 1200 }))).toEqual([
      'the price rose since the quote: this now needs up to $0.0012; quote again',
    ]);
    expect(await describeError(api(429, 'RESOURCE_EXHAUSTED', 'rate_limit_exceeded', undefined, { 'retry-after': '7' }))).toEqual([
      'too many requests: try again in 7 s',
    ]);
    const invalid = api(400, 'INVALID_ARGUMENT', 'invalid_arguments', {
      errors: [
        { instancePath: '/slides/1/seconds', message: 'must be >= 0.5' },
        { instancePath: '', message: 'must NOT have additional properties', params: { additionalProperty: 'txet' } },
        { instancePath: '/format', message: 'must be equal to one of the allowed values', params: { allowedValues: ['png', 'jpeg'] } },
      ],
    });
    expect(await describeError(invalid)).toEqual([
      'invalid arguments:',
      '  slides[1].seconds must be >= 0.5',
      '  arguments must NOT have additional properties: txet',
      '  format must be equal to one of the allowed values: png, jpeg',
    ]);
    expect(await describeError(api(503, 'UNAVAILABLE', 'service_unavailable'))).toEqual(['service unavailable (HTTP 503, request req_1)']);
    expect(await describeError(api(404, 'NOT_FOUND', 'tool_not_found', { tool: 'image.rendr' }))).toEqual([
      'no tool named "image.rendr": tes tools lists them',
    ]);
  });

  it('an execution that ended badly says what it was charged; a network error says so', async () => {
    const failed = { ...execution('failed'), chargedMicros: 5, errorCode: 'provider_error', errorMessage: 'step sleep_1 failed' };
    expect(await describeError(new ExecutionUnsuccessfulError(failed))).toEqual([
      'exe_01JD3Z8X4V6W2Q9R7T5Y1M3N8K failed: provider_error (step sleep_1 failed); charged $0.000005',
    ]);
    expect(await describeError(new TesNetworkError('GET /tools: no answer after 4 attempts (ECONNREFUSED)'))).toEqual([
      'cannot reach the service: GET /tools: no answer after 4 attempts (ECONNREFUSED)',
    ]);
    expect(pointerToPath('/a~1b/0/c')).toBe('a/b[0].c');
  });
});

describe('idempotency keys and upload types', () => {
  it('generated keys are valid for the contract and unique', () => {
    const keys = Array.from({ length: 500 }, () => newIdempotencyKey());
    expect(keys.every((k) => IDEMPOTENCY_KEY_PATTERN.test(k))).toBe(true);
    expect(new Set(keys).size).toBe(500);
    expect(() => newIdempotencyKey('bad prefix')).toThrow(TypeError);
    expect(isValidIdempotencyKey('short')).toBe(false);
    expect(isValidIdempotencyKey('a'.repeat(129))).toBe(false);
    expect(isValidIdempotencyKey('render-0001')).toBe(true);
  });

  it('MIME types come from the magic bytes, else the file name', () => {
    const png = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0]);
    expect(detectMimeType(png, 'x.jpg')).toBe('image/png');
    expect(detectMimeType(Buffer.from([0xff, 0xd8, 0xff, 0xe0]))).toBe('image/jpeg');
    expect(detectMimeType(Buffer.from('RIFF\0\0\0\0WAVEfmt '))).toBe('audio/wav');
    expect(detectMimeType(Buffer.from('\0\0\0\x18ftypisom'))).toBe('video/mp4');
    expect(detectMimeType(Buffer.from('ID3\x04'))).toBe('audio/mpeg');
    expect(detectMimeType(Buffer.from('hello'), 'clip.MP3')).toBe('audio/mpeg');
    expect(detectMimeType(Buffer.from('hello'), 'notes.txt')).toBeUndefined();
  });
});
