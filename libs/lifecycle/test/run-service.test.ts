import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';

/**
 * runService as a service's main.ts uses it, in a child process with real signals: the
 * child is the main.ts, so it alone calls process.exit, with the code runService resolved
 * to. Runs the compiled module (npx tsc -b first).
 */
const dist = path.resolve(__dirname, '../dist/index.js');

// Lines starting with "@ " are the script's own; the rest is the service's JSON log.
const MAIN = `
const { runService, startCleanly } = require(${JSON.stringify(dist)});
const env = process.env;
const say = (t) => process.stdout.write('@ ' + t + '\\n');
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
runService('svc', () => {
  if (env.BAD_CONFIG) throw new Error('SHUTDOWN_TIMEOUT_MS: not a whole number');
  return { logLevel: 'info', shutdownTimeoutMs: Number(env.DEADLINE_MS || 5000) };
}, (config, logger) => startCleanly(async (started) => {
  const alive = setInterval(() => undefined, 1000);
  started.add('db', () => { clearInterval(alive); say('cleanup db'); });
  started.add('amqp', () => say('cleanup amqp'));
  if (env.FAIL_START) throw new Error('broker unreachable');
  say('started');
  return { parts: [
    { name: 'http', stop: async () => { say('stop http'); await sleep(Number(env.DRAIN_MS || 0)); if (env.HANG) await new Promise(() => {}); } },
    { name: 'db', stop: async () => { clearInterval(alive); say('stop db'); } },
  ] };
}, { logger })).then((code) => { say('exit ' + code); process.exit(code); });
`;

interface Ended {
  code: number | null;
  mine: string[];
  events: string[];
  stderr: string;
}

const children = new Set<ChildProcess>();
afterEach(() => {
  // a test that failed early leaves its child running
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  children.clear();
});

function launch(env: Record<string, string> = {}) {
  const child = spawn(process.execPath, ['-e', MAIN], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(child);
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const lines = () => stdout.split('\n').filter(Boolean);
  const ended = new Promise<Ended>((resolve) =>
    child.once('exit', (code) =>
      resolve({
        code,
        mine: lines()
          .filter((l) => l.startsWith('@ '))
          .map((l) => l.slice(2)),
        events: lines()
          .filter((l) => l.startsWith('{'))
          .map((l) => (JSON.parse(l) as { message: string }).message),
        stderr,
      }),
    ),
  );
  const until = async (text: string) => {
    const deadline = Date.now() + 10_000;
    while (!stdout.includes(text)) {
      if (Date.now() > deadline) throw new Error(`child never printed ${text}: ${stdout} ${stderr}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  };
  return { child, ended, until };
}

it('SIGTERM stops the parts in order and the process exits 0', async () => {
  const { child, ended, until } = launch();
  await until('@ started');
  child.kill('SIGTERM');
  const end = await ended;
  expect(end.mine).toEqual(['started', 'stop http', 'stop db', 'exit 0']);
  expect(end.code).toBe(0);
  expect(end.events).toEqual(['process.shutdown.begin', 'process.shutdown.done']);
});

it('a second SIGTERM joins the stop under way: each part is stopped once', async () => {
  const { child, ended, until } = launch({ DRAIN_MS: '300' });
  await until('@ started');
  child.kill('SIGTERM');
  await until('@ stop http');
  child.kill('SIGTERM');
  const end = await ended;
  expect(end.mine).toEqual(['started', 'stop http', 'stop db', 'exit 0']);
  expect(end.events).toContain('process.shutdown.signal_joined');
});

it('a second Ctrl-C exits at once with 130, without waiting for the drain', async () => {
  const { child, ended, until } = launch({ DRAIN_MS: '20000' });
  await until('@ started');
  child.kill('SIGINT');
  await until('@ stop http');
  const second = Date.now();
  child.kill('SIGINT');
  const end = await ended;
  expect(end.code).toBe(130);
  expect(Date.now() - second).toBeLessThan(2_000);
  expect(end.mine).toEqual(['started', 'stop http', 'exit 130']);
  expect(end.events).toContain('process.shutdown.forced');
});

it('a part that overruns the deadline is given up: the rest is stopped and the exit code is 1', async () => {
  const { child, ended, until } = launch({ HANG: '1', DEADLINE_MS: '300' });
  await until('@ started');
  const sent = Date.now();
  child.kill('SIGTERM');
  const end = await ended;
  expect(end.mine).toEqual(['started', 'stop http', 'stop db', 'exit 1']);
  expect(end.code).toBe(1);
  expect(Date.now() - sent).toBeLessThan(3_000);
});

it('a start that fails stops what it had started, newest first, and the process exits 1', async () => {
  const end = await launch({ FAIL_START: '1' }).ended;
  expect(end.mine).toEqual(['cleanup amqp', 'cleanup db', 'exit 1']);
  expect(end.code).toBe(1);
  expect(end.events).toEqual(['svc.start_failed']);
});

it('a bad config is written to stderr and the process exits 2 before starting anything', async () => {
  const end = await launch({ BAD_CONFIG: '1' }).ended;
  expect(end.code).toBe(2);
  expect(end.stderr).toContain('SHUTDOWN_TIMEOUT_MS: not a whole number');
  expect(end.mine).toEqual(['exit 2']);
});
