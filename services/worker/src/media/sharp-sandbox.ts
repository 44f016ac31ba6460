import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import type sharp from 'sharp';
import { StepError } from '@tes/core';
import { hasProgram } from '../programs';

export interface SandboxLimits {
  /** RLIMIT_CPU of one child over its whole life (it is recycled well before). */
  cpuSeconds: number;
  /** RLIMIT_AS of one child: libvips' native memory included, unlike a V8 heap cap. */
  addressSpaceBytes: number;
  /** Children kept warm between jobs (a start costs ~120 ms). */
  maxIdle: number;
}

const DEFAULT_SANDBOX_LIMITS: SandboxLimits = { cpuSeconds: 600, addressSpaceBytes: 2 * 1024 ** 3, maxIdle: 2 };

export type SharpOp = [method: string, args: unknown[]];

interface Reply {
  id: number;
  ok: boolean;
  data?: Uint8Array;
  info?: sharp.OutputInfo;
  cpuMs?: number;
  message?: string;
}

/** The compiled child script (tests run the TypeScript sources; the child always runs from dist). */
function childScript(): string {
  const here = path.join(__dirname, 'sharp-child.js');
  return existsSync(here) ? here : path.resolve(__dirname, '../../dist/media/sharp-child.js');
}

/**
 * Runs sharp pipelines in child processes that can be killed: a step's deadline or abort
 * SIGKILLs the child running it (native libvips/librsvg work cannot be interrupted in-process),
 * each child is capped by prlimit (CPU seconds, address space) and dies with the worker
 * (setpriv --pdeathsig), and children are reused between jobs while they stay well under their
 * CPU budget. A child that dies mid-job (a limit reached) fails the step with
 * `resource_limit_exceeded`; the input was too expensive to render.
 */
export class SharpSandbox {
  private readonly idle: ChildProcess[] = [];
  private readonly busy = new Set<ChildProcess>();
  private seq = 0;
  private stopped = false;

  constructor(private readonly limits: SandboxLimits = DEFAULT_SANDBOX_LIMITS) {}

  async run(input: Buffer, options: sharp.SharpOptions, ops: SharpOp[], signal: AbortSignal): Promise<{ data: Buffer; info: sharp.OutputInfo }> {
    if (signal.aborted) throw signal.reason;
    if (this.stopped) throw new Error('the media sandbox is stopped');
    const child = this.idle.pop() ?? this.spawnChild();
    this.busy.add(child);
    hold(child, true);
    const id = (this.seq += 1);
    let reusable = false;
    try {
      const reply = await new Promise<Reply>((resolve, reject) => {
        const onMessage = (m: Reply) => {
          if (m.id === id) done(() => resolve(m));
        };
        const onExit = (code: number | null, sig: NodeJS.Signals | null) =>
          done(() =>
            reject(
              new StepError(
                'resource_limit_exceeded',
                `rendering stopped: the sandbox exited (${sig ?? `code ${code}`}); the input needs more CPU or memory than a step may use`,
              ),
            ),
          );
        const onAbort = () => done(() => reject(signal.reason));
        const done = (settle: () => void) => {
          child.off('message', onMessage);
          child.off('exit', onExit);
          signal.removeEventListener('abort', onAbort);
          settle();
        };
        child.on('message', onMessage);
        child.once('exit', onExit);
        signal.addEventListener('abort', onAbort, { once: true });
        child.send({ id, input, options, ops });
      });
      if (!reply.ok) throw new Error(reply.message ?? 'sharp failed');
      reusable = (reply.cpuMs ?? Infinity) < (this.limits.cpuSeconds * 1000) / 2;
      const data = reply.data!;
      return { data: Buffer.from(data.buffer, data.byteOffset, data.byteLength), info: reply.info! };
    } finally {
      this.busy.delete(child);
      if (reusable && !this.stopped && this.idle.length < this.limits.maxIdle && child.exitCode === null && child.signalCode === null) {
        // An idle child never keeps the worker's process alive; when that process ends, the
        // IPC channel closes and the child exits.
        hold(child, false);
        this.idle.push(child);
      } else child.kill('SIGKILL');
    }
  }

  /** The children's process ids, busy and idle (for tests and diagnostics). */
  get pids(): number[] {
    return [...this.busy, ...this.idle].map((c) => c.pid).filter((p): p is number => p !== undefined);
  }

  /** Kills every child, idle or busy (a busy one's job fails). */
  async stop(): Promise<void> {
    this.stopped = true;
    for (const c of [...this.idle, ...this.busy]) c.kill('SIGKILL');
    this.idle.length = 0;
  }

  private spawnChild(): ChildProcess {
    const node = [process.execPath, '--max-old-space-size=128', childScript()];
    const limits = [`--cpu=${this.limits.cpuSeconds}`, `--as=${this.limits.addressSpaceBytes}`];
    // Each wrapper execs the next; the parent-death signal survives the execs.
    const [command, ...args] = hasProgram('setpriv') && hasProgram('prlimit') ? ['setpriv', '--pdeathsig', 'KILL', 'prlimit', ...limits, '--', ...node] : node;
    const child = spawn(command!, args, { stdio: ['ignore', 'ignore', 'ignore', 'ipc'], serialization: 'advanced' });
    child.on('error', () => undefined);
    child.once('exit', () => {
      const at = this.idle.indexOf(child);
      if (at !== -1) this.idle.splice(at, 1);
    });
    return child;
  }
}

function hold(child: ChildProcess, on: boolean): void {
  const channel = child.channel as { ref(): void; unref(): void } | null | undefined;
  if (on) {
    child.ref();
    channel?.ref();
  } else {
    child.unref();
    channel?.unref();
  }
}
