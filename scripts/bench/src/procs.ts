import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, readFileSync, type WriteStream } from 'node:fs';
import path from 'node:path';

/**
 * Child processes of the harness: the services, the baseline servers, the load generators,
 * pgbench. Each runs in a process group of its own (so a terminal's Ctrl-C reaches only the
 * harness, which stops them in order) with its output in a log file of the run.
 */
export interface Child {
  name: string;
  pid: number;
  proc: ChildProcess;
  logFile: string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Whether it has exited. */
  done(): boolean;
}

// the one orphan guard, built with scripts/dev (npm run bench builds everything first)
const GUARD = path.resolve(__dirname, '../../dev/dist/orphan-guard.js');
const children = new Set<Child>();

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** --taskset: the CPU list each child starts on (taskset -c … execs the program, so the pid is the program's). */
let pinning: { stack: string; gateway: string } | undefined;
export function setPinning(p: { stack: string; gateway: string } | undefined): void {
  pinning = p;
}
/** The gateway and the servers it is compared with run on the gateway's CPUs; everything else on the stack's. */
const GATEWAY_SIDE = /^(gateway(-\w+)?|hello-\w+|floor)$/;
function pinned(name: string, file: string, args: string[]): [string, string[]] {
  if (!pinning) return [file, args];
  return ['taskset', ['-c', GATEWAY_SIDE.test(name) ? pinning.gateway : pinning.stack, file, ...args]];
}

export { freePort } from '@tes/testing';

function track(name: string, proc: ChildProcess, logFile: string, log: WriteStream): Child {
  if (proc.pid === undefined) throw new Error(`${name}: could not start`);
  let finished = false;
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    proc.once('exit', (code, signal) => {
      finished = true;
      resolve({ code, signal });
    });
    proc.once('error', () => {
      finished = true;
      resolve({ code: null, signal: null });
    });
  });
  const child: Child = { name, pid: proc.pid, proc, logFile, exited, done: () => finished };
  children.add(child);
  void exited.then(() => {
    children.delete(child);
    log.end();
  });
  return child;
}

/** A compiled node script as a child; stdout is kept for the caller when `capture` is set. */
export function startNode(
  name: string,
  script: string,
  options: { env?: Record<string, string>; args?: string[]; logDir: string; capture?: boolean; nodeArgs?: string[] },
): Child & { stdout: () => string } {
  const logFile = path.join(options.logDir, `${name}.log`);
  const log = createWriteStream(logFile, { flags: 'a' });
  const [file, args] = pinned(name, process.execPath, [...(options.nodeArgs ?? []), '--require', GUARD, script, ...(options.args ?? [])]);
  const proc = spawn(file, args, {
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? '/tmp', ...options.env },
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    detached: true,
  });
  let out = '';
  proc.stdout?.on('data', (d: Buffer) => (options.capture ? (out += d.toString()) : log.write(d)));
  proc.stderr?.on('data', (d: Buffer) => log.write(d));
  return Object.assign(track(name, proc, logFile, log), { stdout: () => out });
}

/** A program (pgbench) as a child; resolves with its stdout once it exits. */
export async function runProgram(
  name: string,
  file: string,
  args: string[],
  options: { logDir: string; env?: Record<string, string>; onStart?: (c: Child) => void },
): Promise<{ code: number | null; stdout: string }> {
  const logFile = path.join(options.logDir, `${name}.log`);
  const log = createWriteStream(logFile, { flags: 'a' });
  const [command, argv] = pinned(name, file, args);
  const proc = spawn(command, argv, { env: { ...process.env, ...options.env }, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  let out = '';
  proc.stdout.on('data', (d: Buffer) => {
    out += d.toString();
    log.write(d);
  });
  proc.stderr.on('data', (d: Buffer) => log.write(d));
  const child = track(name, proc, logFile, log);
  options.onStart?.(child);
  const { code } = await child.exited;
  return { code, stdout: out };
}

/**
 * On the first SIGINT or SIGTERM: says so, runs `cleanup` (children, pinning, databases; its
 * failures ignored) and exits 130. A second signal meanwhile changes nothing.
 */
export function cleanUpOnSignal(say: (line: string) => void, cleanup: () => Promise<void>): void {
  let interrupted = false;
  const onSignal = (sig: NodeJS.Signals) => {
    if (interrupted) return;
    interrupted = true;
    say(`${sig}: stopping children and cleaning up`);
    void cleanup()
      .catch(() => undefined)
      .finally(() => process.exit(130));
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
}

/** SIGTERM, then SIGKILL to the child's whole group past the deadline. */
export async function stopChild(child: Child, deadlineMs = 15_000): Promise<void> {
  if (child.done()) return;
  try {
    child.proc.kill('SIGTERM');
  } catch {
    // already gone
  }
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), deadlineMs)));
  const outcome = await Promise.race([child.exited.then(() => 'ok' as const), late]);
  clearTimeout(timer); // a pending deadline would keep the harness alive after its report
  if (outcome === 'late') {
    process.stderr.write(`bench: ${child.name} still running ${deadlineMs} ms after SIGTERM: SIGKILL\n`);
    killGroup(child);
    await child.exited;
  }
}

function killGroup(child: Child): void {
  try {
    process.kill(-child.pid, 'SIGKILL');
  } catch {
    // already gone
  }
}

/** Every child still running, in reverse start order (last resort on errors and signals). */
export async function stopAll(): Promise<void> {
  for (const c of [...children].reverse()) await stopChild(c, 10_000);
}

/** SIGKILL to every child group, synchronously (process 'exit' handler). */
export function killAllNow(): void {
  for (const c of children) killGroup(c);
}

/** Polls a URL until it answers 200, the child exits, or the time runs out. */
export async function waitHttpOk(url: string, child: Child, timeoutMs = 30_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    if (child.done()) throw new Error(`${child.name} exited during startup; see ${child.logFile}:\n${tail(child.logFile)}`);
    const res = await fetch(url, { signal: AbortSignal.timeout(1_000) }).catch(() => undefined);
    await res?.body?.cancel().catch(() => undefined);
    if (res?.status === 200) return;
    if (Date.now() > until) throw new Error(`${child.name} not ready at ${url} after ${timeoutMs} ms; see ${child.logFile}`);
    await sleep(100);
  }
}

function tail(file: string, lines = 20): string {
  try {
    return readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '';
  }
}
