import { spawn, spawnSync } from 'node:child_process';
import { StepError } from '@tes/core';
import { crashPoint } from '@tes/lifecycle';

export interface ProgramResult {
  stdout: Buffer;
  stderr: string;
}

export interface RunOptions {
  signal: AbortSignal;
  cwd?: string;
  /** Stop collecting stdout past this many bytes (the program is killed). */
  maxStdoutBytes?: number;
  /** Grace between SIGTERM and SIGKILL once aborted. */
  killGraceMs?: number;
}

const STDERR_KEEP = 4_000;

/**
 * Runs a media program with an argument array (never a shell). The step's AbortSignal
 * reaches the child: on abort it gets SIGTERM, then SIGKILL after a grace, so an aborted
 * step never leaves ffmpeg running. A non-zero exit rejects with the tail of stderr.
 */
export function runProgram(command: string, args: string[], o: RunOptions): Promise<ProgramResult> {
  return new Promise((resolve, reject) => {
    if (o.signal.aborted) return reject(o.signal.reason);
    // Its own process group, so an abort kills whatever the program started too.
    const child = spawn(command, args, { cwd: o.cwd, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    // a worker killed while a media program runs (the program is orphaned, the step is rerun)
    crashPoint('worker.during_program');
    const out: Buffer[] = [];
    let outBytes = 0;
    let err = '';
    let killTimer: NodeJS.Timeout | undefined;
    let settled = false;
    const signalGroup = (sig: NodeJS.Signals) => {
      try {
        if (child.pid !== undefined) process.kill(-child.pid, sig);
      } catch {
        // already gone
      }
    };
    const kill = () => {
      signalGroup('SIGTERM');
      killTimer = setTimeout(() => signalGroup('SIGKILL'), o.killGraceMs ?? 2_000);
    };
    const onAbort = () => kill();
    o.signal.addEventListener('abort', onAbort, { once: true });
    child.stdout.on('data', (chunk: Buffer) => {
      outBytes += chunk.length;
      if (o.maxStdoutBytes !== undefined && outBytes > o.maxStdoutBytes) {
        if (!settled) {
          settled = true;
          reject(new StepError('artifact_too_large', `${command} produced more than ${o.maxStdoutBytes} bytes`));
        }
        kill();
        return;
      }
      out.push(chunk);
    });
    child.stderr.on('data', (chunk: Buffer) => {
      err = (err + chunk.toString('utf8')).slice(-STDERR_KEEP);
    });
    child.on('error', (e) => {
      o.signal.removeEventListener('abort', onAbort);
      if (!settled) {
        settled = true;
        reject(e);
      }
    });
    child.on('close', (code, sig) => {
      o.signal.removeEventListener('abort', onAbort);
      if (killTimer) clearTimeout(killTimer);
      if (settled) return;
      settled = true;
      if (o.signal.aborted) return reject(o.signal.reason);
      if (code === 0) return resolve({ stdout: Buffer.concat(out), stderr: err });
      reject(new ProgramFailed(command, code, sig, err));
    });
  });
}

export class ProgramFailed extends Error {
  constructor(
    readonly command: string,
    readonly code: number | null,
    readonly signal: NodeJS.Signals | null,
    readonly stderr: string,
  ) {
    super(`${command} exited with ${code ?? signal}: ${stderr.trim().split('\n').slice(-3).join(' | ').slice(0, 500)}`);
    this.name = 'ProgramFailed';
  }
}

const probed = new Map<string, boolean>();

/** Whether a program can be started on this machine (checked once per process). */
export function hasProgram(name: string): boolean {
  const known = probed.get(name);
  if (known !== undefined) return known;
  const flag = name === 'ffmpeg' || name === 'ffprobe' ? '-version' : '--version';
  const r = spawnSync(name, [flag], { stdio: 'ignore', timeout: 10_000 });
  const ok = !r.error;
  probed.set(name, ok);
  return ok;
}
