import { execFile, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { projectBalance, useStack } from '../../../tests/stack';

/**
 * The built `tes` binary as a real child process against the real stack. The child is
 * spawned asynchronously: the gateway it talks to runs in this process's event loop.
 */
const ROOT = join(__dirname, '../../..');
const CLI = join(ROOT, 'libs/client/dist/cli.js');
const stack = useStack();
let dir: string;
const secrets: string[] = [];
const printed: string[] = [];

interface Ran {
  code: number | null;
  stdout: string;
  stderr: string;
}

function tes(args: string[], secret: string | undefined): Promise<Ran> {
  if (secret) secrets.push(secret);
  const env: Record<string, string> = { PATH: process.env.PATH ?? '', TES_URL: stack.baseUrl };
  if (secret) env.TES_API_KEY = secret;
  return new Promise((resolve, reject) => {
    // stdin is not a terminal (a pipe closed at once): nobody can confirm a charge.
    const child = spawn(process.execPath, [CLI, ...args], { env, stdio: ['pipe', 'pipe', 'pipe'] });
    child.stdin.end();
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    child.on('error', reject);
    child.on('close', (code) => {
      printed.push(stdout, stderr);
      resolve({ code, stdout, stderr });
    });
  });
}

async function executionCount(projectId: string): Promise<number> {
  const rows = await stack.db('executions').where({ project_id: projectId }).count<{ n: string }[]>({ n: '*' });
  return Number(rows[0]!.n);
}

beforeAll(async () => {
  // The tests run the compiled binary, so compile this package first (incremental, no references).
  await promisify(execFile)(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-b', join(ROOT, 'libs/client')], { cwd: ROOT });
  dir = await mkdtemp(join(tmpdir(), 'tes-cli-'));
}, 120_000);

afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('tes', () => {
  it('tools, run with --yes (no progress with --json, artifact saved), executions, usage and project, all --json', async () => {
    const p = await stack.seed({ creditMicros: 1_000_000 });
    const tools = await tes(['tools', '--json'], p.secret);
    expect(tools).toMatchObject({ code: 0, stderr: '' });
    expect(JSON.parse(tools.stdout).tools.map((t: { name: string }) => t.name)).toContain('test.sleep');

    const out = join(dir, 'sleep');
    const run = await tes(
      ['run', 'test.sleep', '--arg', 'seconds=0', '--arg', 'steps=2', '--arg', 'costMicrosPerStep=5', '--yes', '--out', out, '--json'],
      p.secret,
    );
    expect(run.code).toBe(0);
    const result = JSON.parse(run.stdout) as {
      execution: { id: string; status: string; chargedMicros: number };
      files: { path: string; sha256: string; sizeBytes: number }[];
    };
    expect(result.execution).toMatchObject({ status: 'succeeded', chargedMicros: 10 });
    expect(run.stderr).toContain('at most $0.000010 (10 micros)');
    expect(run.stderr).not.toContain('steps'); // --json: no progress, stderr says only the quote
    expect(result.files).toHaveLength(1);
    const saved = await readFile(result.files[0]!.path);
    expect(result.files[0]!.path.startsWith(out)).toBe(true);
    expect(saved.length).toBe(result.files[0]!.sizeBytes);
    expect(createHash('sha256').update(saved).digest('hex')).toBe(result.files[0]!.sha256);

    const list = await tes(['executions', '--tool', 'test.sleep', '--limit', '5', '--json'], p.secret);
    expect(list.code).toBe(0);
    expect(JSON.parse(list.stdout)).toMatchObject({ data: [{ id: result.execution.id }], hasMore: false });
    const usage = await tes(['usage', '--json'], p.secret);
    expect(usage.code).toBe(0);
    expect(JSON.parse(usage.stdout)).toMatchObject({ executionCount: 1, chargedMicros: 10, currency: 'usd' });
    const project = await tes(['project', '--json'], p.secret);
    expect(JSON.parse(project.stdout)).toMatchObject({ project: { id: p.projectId }, balance: { availableMicros: 1_000_000 - 10 } });
    const human = await tes(['usage'], p.secret);
    expect(human.stdout).toContain('charged $0.000010');
  });

  it('run shows progress from the event stream, one plain line per change when stderr is not a terminal', async () => {
    const p = await stack.seed({ creditMicros: 1_000_000 });
    const started = Date.now();
    const run = await tes(
      ['run', 'test.sleep', '--arg', 'seconds=0.3', '--arg', 'steps=2', '--arg', 'costMicrosPerStep=5', '--yes', '--out', join(dir, 'progress')],
      p.secret,
    );
    expect(run.code).toBe(0);
    expect(Date.now() - started).toBeLessThan(5_000); // a poll would have waited the 202's 5 s
    const lines = run.stderr.split('\n').filter((l) => l.startsWith('exe_'));
    // every step's start and end, as it happened; no escape codes, no redraws
    expect(
      lines.map((l) =>
        l
          .replace(/^exe_\w+\s+/, '')
          .replace(/\s+\+[\d.]+s$/, '')
          .replace(/\s+/g, ' '),
      ),
    ).toEqual(expect.arrayContaining(['running 0/2 steps sleep_0', 'running 1/2 steps sleep_1', 'succeeded 2/2 steps']));
    expect(lines.at(-1)).toMatch(/succeeded\s+2\/2 steps/);
    expect(run.stderr.includes('\x1b') || run.stderr.includes('\r')).toBe(false);
    expect(run.stdout).toMatch(/succeeded/);
  });

  it('--strategy: wait works; an unknown one is a usage error before anything is quoted or submitted', async () => {
    const p = await stack.seed({ creditMicros: 1_000_000 });
    const waited = await tes(
      [
        'run',
        'test.sleep',
        '--arg',
        'seconds=0',
        '--arg',
        'steps=1',
        '--arg',
        'costMicrosPerStep=5',
        '--yes',
        '--strategy',
        'wait',
        '--out',
        join(dir, 'wait'),
        '--json',
      ],
      p.secret,
    );
    expect(waited.code).toBe(0);
    expect(JSON.parse(waited.stdout).execution).toMatchObject({ status: 'succeeded', chargedMicros: 5 });
    const bad = await tes(
      ['run', 'test.sleep', '--arg', 'seconds=0', '--arg', 'steps=1', '--arg', 'costMicrosPerStep=5', '--yes', '--strategy', 'sse'],
      p.secret,
    );
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--strategy must be one of auto, stream, wait, poll');
    expect(await executionCount(p.projectId)).toBe(1);
  });

  it('--file uploads and passes the file id: image.render output transformed to JPEG', async () => {
    const p = await stack.seed({ creditMicros: 1_000_000 });
    const rendered = await tes(
      ['run', 'image.render', '--arg', 'text=CLI', '--arg', 'width=64', '--arg', 'height=64', '--yes', '--out', join(dir, 'render'), '--json'],
      p.secret,
    );
    expect(rendered.code).toBe(0);
    const png = (JSON.parse(rendered.stdout) as { files: { path: string }[] }).files[0]!.path;
    const out = join(dir, 'transform');
    const run = await tes(['run', 'image.transform', '--file', `fileId=${png}`, '--arg', 'format=jpeg', '--yes', '--out', out], p.secret);
    expect(run.code).toBe(0);
    expect(run.stderr).toMatch(/uploaded .*render.* as file_/);
    expect(run.stdout).toMatch(/succeeded/);
    const [file] = await readdir(out);
    expect(file).toMatch(/^art_.*\.jpeg$/);
    const jpeg = await readFile(join(out, file!));
    expect([...jpeg.subarray(0, 3)]).toEqual([0xff, 0xd8, 0xff]);
  });

  it('refusals: insufficient balance exits 1 naming the code; no --yes without a terminal exits 2; nothing submitted', async () => {
    const poor = await stack.seed({ creditMicros: 9 });
    const refused = await tes(['run', 'test.sleep', '--arg', 'seconds=0', '--arg', 'steps=2', '--arg', 'costMicrosPerStep=5', '--yes', '--json'], poor.secret);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('insufficient_balance');
    expect(JSON.parse(refused.stdout).error).toMatchObject({ code: 'insufficient_balance', status: 429, errorStatus: 'RESOURCE_EXHAUSTED' });
    expect(await executionCount(poor.projectId)).toBe(0);
    expect(await projectBalance(stack.db, poor.projectId)).toEqual({ available: 9, reserved: 0 });

    const rich = await stack.seed({ creditMicros: 1_000_000 });
    const unconfirmed = await tes(['run', 'test.sleep', '--arg', 'seconds=0', '--arg', 'steps=1', '--arg', 'costMicrosPerStep=5'], rich.secret);
    expect(unconfirmed.code).toBe(2);
    expect(unconfirmed.stderr).toContain('pass --yes');
    expect(await executionCount(rich.projectId)).toBe(0);

    const invalid = await tes(['quote', 'test.sleep', '--arg', 'steps=99'], rich.secret);
    expect(invalid.code).toBe(1);
    expect(invalid.stderr).toMatch(/invalid_arguments[\s\S]*\/steps/);
    const noKey = await tes(['tools'], undefined);
    expect(noKey.code).toBe(2);
    expect(noKey.stderr).toContain('TES_API_KEY');
  });

  it('an execution that fails exits 1 with its errorCode, and the JSON error carries the charged execution', async () => {
    const p = await stack.seed({ creditMicros: 1_000_000 });
    const failed = await tes(
      ['run', 'test.sleep', '--arg', 'seconds=0', '--arg', 'steps=2', '--arg', 'costMicrosPerStep=5', '--arg', 'failAtStep=1', '--yes', '--json'],
      p.secret,
    );
    expect(failed.code).toBe(1);
    expect(failed.stderr).toContain('provider_error');
    const { error } = JSON.parse(failed.stdout) as { error: { code: string; executionId: string; execution: { status: string; chargedMicros: number } } };
    expect(error).toMatchObject({ code: 'provider_error', executionId: expect.stringMatching(/^exe_/), execution: { status: 'failed', chargedMicros: 5 } });
    expect(await projectBalance(stack.db, p.projectId)).toEqual({ available: 1_000_000 - 5, reserved: 0 });
  });

  it('never prints an API key', () => {
    expect(secrets.length).toBeGreaterThan(0);
    // Checked against everything the runs above printed.
    for (const s of secrets) expect(printed.join('\n')).not.toContain(s);
  });
});
