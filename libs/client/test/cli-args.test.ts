import { parseArgValue, parseArguments, parseFiles, parseIntegerOption, UsageError } from '../src/cli/args';
import { table, usd } from '../src/cli/format';
import { main } from '../src/cli/main';
import { detectMimeType, IDEMPOTENCY_KEY_PATTERN, isValidIdempotencyKey, newIdempotencyKey } from '../src';

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
      { field: 'fileId', path: './a.png' },
      { field: 'soundtrackFileId', path: 'b=c.wav' },
    ]);
    expect(() => parseFiles(['fileId=a.png'], { fileId: 'file_x' })).toThrow(/given twice/);
    expect(() => parseFiles(['fileId=a', 'fileId=b'])).toThrow(/given twice/);
    expect(() => parseFiles(['fileId='])).toThrow(/needs a path/);
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
    expect(await cli(['run', '--help'])).toMatchObject({ code: 0, stdout: expect.stringContaining('tes run <tool>') });
    expect((await cli([])).code).toBe(2);
    expect(await cli(['frobnicate'])).toMatchObject({ code: 2, stderr: expect.stringContaining('unknown command') });
  });

  it('a missing key, a bad flag, a missing positional or a bad --limit', async () => {
    expect(await cli(['tools'], {})).toMatchObject({ code: 2, stderr: expect.stringContaining('TES_API_KEY is not set') });
    expect(await cli(['tools', '--bogus'])).toMatchObject({ code: 2, stderr: expect.stringContaining("Unknown option '--bogus'") });
    expect(await cli(['run'])).toMatchObject({ code: 2, stderr: expect.stringContaining('expected <tool>') });
    expect(await cli(['quote', 'test.sleep', '--arg', 'steps'])).toMatchObject({ code: 2, stderr: expect.stringContaining('key=value') });
    const limit = await cli(['executions', '--limit', '500', '--json']);
    expect(limit.code).toBe(2);
    expect(JSON.parse(limit.stdout)).toEqual({ error: { code: 'usage', message: expect.stringContaining('--limit') } });
    expect((await cli(['executions', '--status', 'done'])).code).toBe(2);
  });

  it('a network failure is exit 1 with the code, and never prints the key', async () => {
    const env = { TES_API_KEY: 'tes_abcdefgh_secretsecretsecretsecretsecret12', TES_URL: 'http://127.0.0.1:9' };
    const r = await cli(['usage', '--json'], env);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('network_error');
    expect(JSON.parse(r.stdout).error.code).toBe('network_error');
    expect(r.stdout + r.stderr).not.toContain('secretsecret');
  }, 30_000);
});

describe('formatting', () => {
  it('money is integer micros shown with six decimals', () => {
    expect([usd(0), usd(10), usd(1_500), usd(1_000_000), usd(123_456_789), usd(null)]).toEqual([
      '$0.000000',
      '$0.000010',
      '$0.001500',
      '$1.000000',
      '$123.456789',
      'none',
    ]);
  });

  it('tables pad columns (the progress view: cli-progress.test.ts)', () => {
    expect(table(['A', 'BB'], [['xyz', '1']])).toBe('A    BB\nxyz  1\n');
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
