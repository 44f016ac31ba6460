import { execFile, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer, request as httpRequest, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { promisify } from 'node:util';
import { projectBalance, useStack, waitForExecution } from '../../../tests/stack';
import { TesClient } from '../src';

/**
 * The built `tes` binary as a real child process against the real stack. The child is
 * spawned asynchronously: the gateway it talks to runs in this process's event loop.
 */
const ROOT = join(__dirname, '../../..');
const CLI = join(ROOT, 'clients/typescript/dist/cli.js');
const stack = useStack();
let dir: string;
const secrets: string[] = [];
const printed: string[] = [];

interface Ran {
  code: number | null;
  stdout: string;
  stderr: string;
}

function tes(args: string[], secret: string | undefined, url = stack.baseUrl): Promise<Ran> {
  if (secret) secrets.push(secret);
  const env: Record<string, string> = { PATH: process.env.PATH ?? '', TES_URL: url };
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

/**
 * An HTTP proxy in front of the gateway that forwards every request; for those `lose` picks it
 * waits for the gateway's whole answer (the request was applied) and then drops the connection,
 * so the client sees no answer. Returns its URL and what it saw as "METHOD path status|lost".
 */
async function losingProxy(lose: (req: IncomingMessage) => boolean): Promise<{ url: string; seen: string[]; close(): Promise<void> }> {
  const upstream = new URL(stack.baseUrl);
  const seen: string[] = [];
  const server = createServer((req, res) => {
    const drop = lose(req);
    const up = httpRequest(
      { host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: { ...req.headers, host: upstream.host } },
      (answer) => {
        if (!drop) {
          seen.push(`${req.method} ${req.url} ${answer.statusCode}`);
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(res);
          return;
        }
        answer.resume();
        answer.on('end', () => {
          seen.push(`${req.method} ${req.url} lost`);
          req.socket.destroy();
        });
      },
    );
    up.on('error', () => req.socket.destroy());
    req.pipe(up);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    seen,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

async function executionCount(projectId: string): Promise<number> {
  const rows = await stack.db('executions').where({ project_id: projectId }).count<{ n: string }[]>({ n: '*' });
  return Number(rows[0]!.n);
}

beforeAll(async () => {
  // The tests run the compiled binary, so compile this package first (incremental, no references).
  await promisify(execFile)(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-b', join(ROOT, 'clients/typescript')], { cwd: ROOT });
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
    // --json: no progress, stderr says only the quote
    expect(run.stderr).toMatch(/^test\.sleep \(sleep\): at most \$0\.00001 \(2 steps\), at least \$0\.00; price version [\w.-]+\n$/);
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
    expect(human.stdout).toContain('charged $0.00001');
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

  it('refusals: insufficient balance exits 1 in words with the amounts; no --yes without a terminal exits 2; nothing submitted', async () => {
    const poor = await stack.seed({ creditMicros: 9 });
    const refused = await tes(['run', 'test.sleep', '--arg', 'seconds=0', '--arg', 'steps=2', '--arg', 'costMicrosPerStep=5', '--yes', '--json'], poor.secret);
    expect(refused.code).toBe(1);
    // the quote goes to stderr first; then the error, once, in words
    expect(refused.stderr.split('\n').filter((l) => l.startsWith('tes run:'))).toEqual([
      'tes run: insufficient balance: this needs $0.00001, $0.000009 is available',
    ]);
    expect(refused.stderr).not.toContain('insufficient_balance');
    expect(JSON.parse(refused.stdout).error).toMatchObject({ code: 'insufficient_balance', status: 429, errorStatus: 'RESOURCE_EXHAUSTED' });
    expect(await executionCount(poor.projectId)).toBe(0);
    expect(await projectBalance(stack.db, poor.projectId)).toEqual({ available: 9, reserved: 0 });

    const rich = await stack.seed({ creditMicros: 1_000_000 });
    const unconfirmed = await tes(['run', 'test.sleep', '--arg', 'seconds=0', '--arg', 'steps=1', '--arg', 'costMicrosPerStep=5'], rich.secret);
    expect(unconfirmed.code).toBe(2);
    expect(unconfirmed.stderr).toContain('pass --yes');
    expect(await executionCount(rich.projectId)).toBe(0);

    const invalid = await tes(
      ['quote', 'test.sleep', '--arg', 'seconds=0', '--arg', 'costMicrosPerStep=1', '--arg', 'steps=99', '--arg', 'txet=1'],
      rich.secret,
    );
    expect(invalid.code).toBe(1);
    // The gateway's hint per problem: the field, what it should be (issue #29).
    expect(invalid.stderr).toBe(
      'tes quote: invalid arguments:\n' +
        '  arguments.txet is not a property of test.sleep (its properties: model, seconds, steps, costMicrosPerStep, failAtStep)\n' +
        '  arguments.steps must be <= 20\n',
    );
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
    expect(failed.stderr).toMatch(/^tes run: exe_\w+ failed: provider_error \(.*\); charged \$0\.000005$/m);
    const { error } = JSON.parse(failed.stdout) as { error: { code: string; executionId: string; execution: { status: string; chargedMicros: number } } };
    expect(error).toMatchObject({ code: 'provider_error', executionId: expect.stringMatching(/^exe_/), execution: { status: 'failed', chargedMicros: 5 } });
    expect(await projectBalance(stack.db, p.projectId)).toEqual({ available: 1_000_000 - 5, reserved: 0 });
  });

  it('a submit whose every answer is lost: the error prints the key; the same command with --idempotency-key gets that execution, charged once', async () => {
    const p = await stack.seed({ creditMicros: 1_000_000 });
    const run = ['run', 'test.sleep', '--arg', 'seconds=0', '--arg', 'steps=2', '--arg', 'costMicrosPerStep=5', '--yes', '--out', join(dir, 'resend')];
    const proxy = await losingProxy((req) => req.method === 'POST' && req.url === '/tools/test.sleep');
    let failed: Ran;
    try {
      failed = await tes([...run, '--json'], p.secret, proxy.url);
    } finally {
      await proxy.close();
    }
    expect(failed.code).toBe(1);
    expect(proxy.seen.filter((l) => l.startsWith('POST /tools/test.sleep'))).toEqual(Array(4).fill('POST /tools/test.sleep lost'));
    const { error } = JSON.parse(failed.stdout) as { error: { code: string; idempotencyKey: string; mayHaveBeenAccepted: boolean } };
    expect(error).toMatchObject({ code: 'network_error', mayHaveBeenAccepted: true, idempotencyKey: expect.stringMatching(/^tes-/) });
    const key = error.idempotencyKey;
    expect(failed.stderr).toContain(`tes run: cannot reach the service: POST /tools/test.sleep: no answer after 4 attempts`);
    expect(failed.stderr).toContain(`\n  the request may have been accepted; resend with --idempotency-key ${key}\n`);
    // the first send was applied: one execution holds the reservation
    expect(await executionCount(p.projectId)).toBe(1);

    const again = await tes([...run, '--idempotency-key', key, '--json'], p.secret);
    expect(again.code).toBe(0);
    const { execution } = JSON.parse(again.stdout) as { execution: { id: string; status: string; chargedMicros: number } };
    expect(execution).toMatchObject({ status: 'succeeded', chargedMicros: 10 });
    const row = await stack.db('executions').where({ project_id: p.projectId }).first();
    expect([row.id, row.idempotency_key]).toEqual([execution.id, key]);
    expect(await executionCount(p.projectId)).toBe(1);
    expect(await projectBalance(stack.db, p.projectId)).toEqual({ available: 1_000_000 - 10, reserved: 0 });

    const bad = await tes([...run, '--idempotency-key', 'no spaces'], p.secret);
    expect([bad.code, bad.stderr]).toEqual([2, expect.stringContaining('--idempotency-key must be 8-128 of letters')]);
  });

  it('monthly cap: in words, with what the execution needs and what the cap leaves', async () => {
    const capped = await stack.seed({ creditMicros: 1_000_000, monthlyCapMicros: 8 });
    const refused = await tes(['run', 'test.sleep', '--arg', 'seconds=0', '--arg', 'steps=2', '--arg', 'costMicrosPerStep=5', '--yes'], capped.secret);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('tes run: monthly cap reached: this needs $0.00001, $0.000008 of the $0.000008 monthly cap is left\n');
    expect(await executionCount(capped.projectId)).toBe(0);
  });

  it('upload prints the file id and the facts measured in it; --json is the API answer', async () => {
    const p = await stack.seed({ creditMicros: 1_000_000 });
    const rendered = await tes(
      ['run', 'image.render', '--arg', 'text=Up', '--arg', 'width=48', '--arg', 'height=32', '--yes', '--out', join(dir, 'up'), '--json'],
      p.secret,
    );
    expect(rendered.code).toBe(0);
    const png = (JSON.parse(rendered.stdout) as { files: { path: string }[] }).files[0]!.path;
    const json = await tes(['upload', png, '--json'], p.secret);
    expect(json).toMatchObject({ code: 0, stderr: '' });
    const file = JSON.parse(json.stdout) as { id: string; mimeType: string; sizeBytes: number; facts?: { width: number; height: number } | null };
    expect(file).toMatchObject({ id: expect.stringMatching(/^file_/), mimeType: 'image/png' });
    const human = await tes(['upload', png], p.secret);
    expect(human.code).toBe(0);
    const lines = human.stdout.split('\n');
    expect(lines[0]).toBe(file.id); // the same bytes, the same id
    expect(lines[1]).toMatch(new RegExp(`^  image/png, ${file.sizeBytes.toLocaleString('en-US')} bytes`));
    // the facts the gateway measured (issue #16 part 1): the 48×32 PNG rendered above
    expect(file.facts).toMatchObject({ width: 48, height: 32 });
    expect(lines[1]).toContain(', 48×32');
    const missing = await tes(['upload', join(dir, 'nothing-here.png')], p.secret);
    expect(missing).toMatchObject({ code: 2, stderr: expect.stringContaining('cannot read') });
  });

  it('tools NAME: arguments, price, models and an example, readable; an unknown name exits 2', async () => {
    const p = await stack.seed({ creditMicros: 1 });
    const shown = await tes(['tools', 'video.slideshow'], p.secret);
    expect(shown.code).toBe(0);
    const out = shown.stdout;
    expect(out).toMatch(/^video\.slideshow {2}\(video, (available|NOT available now)\)\n/);
    expect(out).toMatch(/\nPrice: from \$[\d.]+ per started second/);
    expect(out).toMatch(/\n {2}slides\* +array of 1-20 objects +1 to 20 slides/);
    expect(out).toMatch(/\n {2}slides\[\]\.fileId +file id +An uploaded PNG or JPEG/);
    expect(out).toMatch(/\n {2}width +even integer 128-1920 .*Default 1280\./);
    expect(out).toContain('Each of slides[]: exactly one of fileId, text.');
    expect(out).toMatch(/\nModels:\n {2}ffmpeg +(available|not available)/);
    expect(out).toMatch(/\nExample:\n {2}tes run video\.slideshow --arg 'slides\[0\]\.text=Quarterly update'/);
    expect(out).toContain('--file slides[1].fileId=picture.png');
    expect(out).not.toMatch(/[{}"]/); // words and tables, not JSON
    const json = await tes(['tools', 'image.render', '--json'], p.secret);
    expect(JSON.parse(json.stdout)).toMatchObject({ name: 'image.render', inputSchema: { type: 'object' } });
    const unknown = await tes(['tools', 'image.rendr'], p.secret);
    expect(unknown).toMatchObject({ code: 2, stderr: expect.stringContaining('no tool named "image.rendr" (image.render, image.generate, image.transform?)') });
  });

  it('--file into an array item: a slideshow whose second slide is an uploaded image', async () => {
    const p = await stack.seed({ creditMicros: 1_000_000 });
    const rendered = await tes(
      ['run', 'image.render', '--arg', 'text=Slide', '--arg', 'width=64', '--arg', 'height=64', '--yes', '--out', join(dir, 'slide'), '--json'],
      p.secret,
    );
    const png = (JSON.parse(rendered.stdout) as { files: { path: string }[] }).files[0]!.path;
    const run = await tes(
      [
        'run',
        'video.slideshow',
        '--arg',
        'slides[0].text=Hello',
        '--arg',
        'slides[0].seconds=1',
        '--file',
        `slides[1].fileId=${png}`,
        '--arg',
        'slides[1].seconds=1',
        '--arg',
        'width=128',
        '--arg',
        'height=128',
        '--yes',
        '--out',
        join(dir, 'show'),
        '--json',
      ],
      p.secret,
    );
    expect(run.code).toBe(0);
    expect(run.stderr).toMatch(/uploaded .*slide.* as file_\w+ \(image\/png/);
    const { execution } = JSON.parse(run.stdout) as { execution: { status: string; arguments: { slides: { fileId?: string; text?: string }[] } } };
    expect(execution.status).toBe('succeeded');
    expect(execution.arguments.slides).toEqual([
      expect.objectContaining({ text: 'Hello' }),
      expect.objectContaining({ fileId: expect.stringMatching(/^file_/) }),
    ]);
    const [mp4] = await readdir(join(dir, 'show'));
    expect(mp4).toMatch(/^art_.*\.mp4$/);
  });

  it('executions: filters and paging; cancel; download saves every artifact checked against its sha256', async () => {
    const p = await stack.seed({ creditMicros: 1_000_000 });
    const sleep = (extra: string[] = []) =>
      tes(
        [
          'run',
          'test.sleep',
          '--arg',
          'seconds=0',
          '--arg',
          'steps=1',
          '--arg',
          'costMicrosPerStep=5',
          ...extra,
          '--yes',
          '--out',
          join(dir, 'pages'),
          '--json',
        ],
        p.secret,
      );
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((JSON.parse((await sleep()).stdout) as { execution: { id: string } }).execution.id);
    expect((await sleep(['--arg', 'failAtStep=0'])).code).toBe(1);

    // newest first, one page at a time, following the printed --before
    const first = await tes(['executions', '--status', 'succeeded', '--tool', 'test.sleep', '--limit', '2'], p.secret);
    expect(first.code).toBe(0);
    const rows = first.stdout.split('\n');
    expect(rows[0]).toMatch(/^ID +TOOL +STATUS +CHARGED +CREATED$/);
    expect(rows.slice(1, 3).map((r) => r.split(/\s+/)[0])).toEqual([ids[2], ids[1]]);
    expect(rows[1]).toMatch(/test\.sleep +succeeded +\$0\.000005 +\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ$/);
    const next = /^more: tes (executions .*)$/m.exec(first.stdout)![1]!;
    expect(next).toBe(`executions --before ${ids[1]} --status succeeded --tool test.sleep --limit 2`);
    const second = await tes(next.split(' '), p.secret);
    expect(second.stdout.split('\n')[1]!.split(/\s+/)[0]).toBe(ids[0]);
    expect(second.stdout).not.toContain('more:');
    const failed = await tes(['executions', '--status', 'failed', '--json'], p.secret);
    expect(JSON.parse(failed.stdout).data).toHaveLength(1);

    // download: every artifact, checked, into --out
    const out = join(dir, 'downloaded');
    const saved = await tes(['download', ids[0]!, '--out', out], p.secret);
    expect(saved.code).toBe(0);
    expect(saved.stdout).toMatch(/^saved .*downloaded\/art_\w+\.txt {2}\(text\/plain.*, \d+ bytes, sha256 checked\)\n$/);
    const execution = JSON.parse((await tes(['execution', ids[0]!, '--json'], p.secret)).stdout) as { output: { artifacts: { id: string; sha256: string }[] } };
    const files = await readdir(out);
    expect(files).toEqual(execution.output.artifacts.map((a) => `${a.id}.txt`));
    expect(
      createHash('sha256')
        .update(await readFile(join(out, files[0]!)))
        .digest('hex'),
    ).toBe(execution.output.artifacts[0]!.sha256);

    // cancel: a run submitted by the SDK, cancelled by the CLI, ends cancelled
    const sdk = new TesClient({ apiKey: p.secret, baseUrl: stack.baseUrl });
    const args = { seconds: 1, steps: 3, costMicrosPerStep: 5 };
    const quote = await sdk.quote('test.sleep', args);
    const { execution: submitted } = await sdk.submit('test.sleep', args, { ...quote, idempotencyKey: 'cli-cancel-0001' });
    const cancelled = await tes(['cancel', submitted.id], p.secret);
    expect(cancelled.code).toBe(0);
    expect(cancelled.stdout).toMatch(new RegExp(`^${submitted.id} {2}test\\.sleep \\(sleep\\) {2}(cancelled|(queued|running) \\(cancel requested\\))\n`));
    expect(await waitForExecution(stack, p.secret, submitted.id)).toMatchObject({ status: 'cancelled' });
    const again = await tes(['cancel', ids[0]!], p.secret);
    expect(again).toMatchObject({ code: 1, stderr: 'tes cancel: the execution has already ended: there is nothing to cancel\n' });
    const none = await tes(['download', 'exe_01JD3Z8X4V6W2Q9R7T5Y1M3N8K'], p.secret);
    expect(none).toMatchObject({ code: 1, stderr: 'tes download: no such execution in this project\n' });
  });

  it('npx tes: the bin link of the repository (node_modules/.bin/tes, executable in git) runs the built CLI', async () => {
    const { stdout } = await promisify(execFile)(join(ROOT, 'node_modules/.bin/tes'), ['--version'], { cwd: ROOT });
    expect(stdout).toBe('0.1.0\n');
  });

  it('never prints an API key', () => {
    expect(secrets.length).toBeGreaterThan(0);
    // Checked against everything the runs above printed.
    for (const s of secrets) expect(printed.join('\n')).not.toContain(s);
  });
});
