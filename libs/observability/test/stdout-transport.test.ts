import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';

/**
 * The default transport in a child process whose stdout is a real pipe: what a service's
 * stdout is under Kubernetes or compose. Runs the compiled module (npx tsc -b first).
 */
const dist = path.resolve(__dirname, '../dist/index.js');

const children = new Set<ChildProcess>();
afterEach(() => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  children.clear();
});

function launch(script: string): { child: ChildProcess; stdout: () => string; exited: Promise<number | null> } {
  const child = spawn(process.execPath, ['-e', `const { createLogger, logFields, flushLogs } = require(${JSON.stringify(dist)});\n${script}`], {
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  children.add(child);
  const chunks: Buffer[] = [];
  child.stdout.on('data', (d: Buffer) => chunks.push(d));
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<number | null>((resolve) =>
    child.once('close', (code) => {
      if (code !== 0) process.stderr.write(stderr);
      resolve(code);
    }),
  );
  return { child, stdout: () => Buffer.concat(chunks).toString('utf8'), exited };
}

const records = (text: string) =>
  text
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Record<string, unknown>);

describe('StdoutTransport (the default transport)', () => {
  it('writes every line, in order, flushLogs waits for them, and a line logged in the turn of process.exit is written', async () => {
    const run = launch(`
      const log = createLogger({ service: 'svc' });
      let i = 0;
      const burst = () => {
        for (let j = 0; j < 500; j++) logFields(log, 'info', 'test.line', { i: i++ });
        if (i < 5000) return setImmediate(burst);
        // as runService does: wait for stdout, then exit; the line logged in the exit's own
        // turn is written by the exit hook
        void flushLogs().then(() => { log.warn('svc.stopped', { lines: i }); process.exit(0); });
      };
      burst();
    `);
    expect(await run.exited).toBe(0);
    const lines = records(run.stdout());
    expect(lines).toHaveLength(5001);
    expect(lines.slice(0, 5000).map((l) => l.i)).toEqual(Array.from({ length: 5000 }, (_, i) => i));
    expect(lines[0]).toEqual({ i: 0, level: 'info', message: 'test.line', service: 'svc', timestamp: expect.any(String) });
    expect(lines[5000]).toMatchObject({ level: 'warn', message: 'svc.stopped', lines: 5000, service: 'svc' });
  });

  it('a blocked stdout costs bounded memory: lines past the bound are dropped, counted and reported once it moves', async () => {
    // 40,000 lines of ≈ 1 KB (≈ 40 MB) against a bound of 8 MiB, while nobody reads the pipe
    const run = launch(`
      const log = createLogger({ service: 'svc' });
      const pad = 'x'.repeat(1000);
      let i = 0;
      const burst = () => {
        for (let j = 0; j < 1000; j++) logFields(log, 'info', 'test.line', { i: i++, pad });
        if (i < 40000) return setImmediate(burst);
        process.stderr.write('logged ' + process.memoryUsage().rss + '\\n');
        process.stdin.once('data', () => {
          logFields(log, 'info', 'test.after', {});
          void flushLogs().then((done) => process.exit(done ? 0 : 3));
        });
      };
      burst();
    `);
    const child = run.child;
    child.stdout!.pause();
    const rss = await new Promise<number>((resolve) => {
      let text = '';
      child.stderr!.on('data', (d: Buffer) => {
        text += d.toString();
        const m = /logged (\d+)/.exec(text);
        if (m) resolve(Number(m[1]));
      });
    });
    // ≈ 40 MB of text logged, a few MB held; without the bound the whole 40 MB (twice, as strings) would be
    expect(rss).toBeLessThan(200 * 1024 * 1024);
    child.stdout!.resume();
    child.stdin!.write('go\n');
    expect(await run.exited).toBe(0);
    const lines = records(run.stdout());
    const notices = lines.filter((l) => l.message === 'logger.lines_dropped');
    const written = lines.filter((l) => l.message === 'test.line');
    const dropped = notices.reduce((n, l) => n + (l.droppedLines as number), 0);
    expect(notices.length).toBeGreaterThanOrEqual(1);
    expect(notices[0]).toMatchObject({ level: 'warn', service: 'svc', reason: 'stdout blocked' });
    expect(dropped).toBeGreaterThan(0);
    // every line is either written or counted
    const after = lines.filter((l) => l.message === 'test.after').length;
    expect({ written: written.length, dropped, after, total: written.length + dropped + after }).toEqual({
      written: written.length,
      dropped,
      after,
      total: 40001,
    });
    // the lines written keep their order
    const seen = written.map((l) => l.i as number);
    expect(seen).toEqual([...seen].sort((a, b) => a - b));
  });
});
