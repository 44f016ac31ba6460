import { spawn } from 'node:child_process';
import path from 'node:path';

/**
 * No process outlives its launcher (issue #18, item 7): a service whose launcher dies is told to
 * shut down (SIGTERM), and one whose shutdown hangs (here: it ignores SIGTERM and keeps a core
 * busy, as a worker stuck in an unstoppable render did) is killed once SHUTDOWN_TIMEOUT_MS + 5 s
 * have passed. The guard is the one `npm start`, the benchmark and the fault suites preload.
 */
const GUARD = path.resolve(__dirname, '../../scripts/dev/dist/orphan-guard.js');

function launch(script: string, env: Record<string, string>) {
  const child = spawn(process.execPath, ['--require', GUARD, '-e', script], { stdio: ['ignore', 'ignore', 'inherit', 'ipc'], env: { ...process.env, ...env } });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null; at: number }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal, at: Date.now() })),
  );
  return { child, exited };
}

it('a service whose launcher is gone shuts down as on SIGTERM', async () => {
  const { child, exited } = launch("process.on('SIGTERM', () => process.exit(0)); setInterval(() => {}, 1000);", { SHUTDOWN_TIMEOUT_MS: '300' });
  await new Promise((r) => setTimeout(r, 300));
  const cut = Date.now();
  child.disconnect(); // the launcher's side of the channel goes away, as when it is SIGKILLed
  const end = await exited;
  expect(end.code).toBe(0);
  expect(end.at - cut).toBeLessThan(2_000);
});

it('a service whose shutdown hangs is killed at the hard deadline', async () => {
  // ignores SIGTERM and spins: only the guard's SIGKILL ends it
  const { child, exited } = launch("process.on('SIGTERM', () => {}); setInterval(() => { const t = Date.now(); while (Date.now() - t < 50); }, 60);", {
    SHUTDOWN_TIMEOUT_MS: '300',
  });
  await new Promise((r) => setTimeout(r, 300));
  const cut = Date.now();
  child.disconnect();
  const end = await exited;
  expect(end.signal).toBe('SIGKILL');
  expect(end.at - cut).toBeGreaterThanOrEqual(5_000);
  expect(end.at - cut).toBeLessThan(8_000);
}, 15_000);
