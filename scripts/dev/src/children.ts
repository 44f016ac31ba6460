import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import readline from 'node:readline';
import type { Readable } from 'node:stream';
import { line } from './output';
import { sleep } from './ports';

export interface ServiceSpec {
  name: string;
  /** The service's compiled main.js. */
  script: string;
  env: Record<string, string>;
  /** Answers 200 once the service can work (its /readyz on METRICS_PORT). */
  readyUrl: string;
}

export interface ExitInfo {
  code: number | null;
  signal: NodeJS.Signals | null;
}

interface Running {
  spec: ServiceSpec;
  child: ChildProcess;
  exit: ExitInfo | undefined;
  exited: Promise<ExitInfo>;
  /** Resolves once stdout and stderr are drained too, so the last log lines get printed. */
  closed: Promise<void>;
}

const GUARD = path.join(__dirname, 'orphan-guard.js');

/** Forwards a child's output line by line, each prefixed with the service name. */
function forward(stream: Readable | null, name: string, to: NodeJS.WriteStream): void {
  if (!stream) return;
  readline.createInterface({ input: stream, crlfDelay: Infinity }).on('line', (l) => line(name, l, to));
}

function describe(e: ExitInfo): string {
  return e.signal ? `signal ${e.signal}` : `code ${e.code}`;
}

/**
 * The service processes. Each runs in a process group of its own (`detached`), so a
 * Ctrl-C in the terminal reaches only the launcher, which then stops them in a known
 * order: services first, the Postgres and S3 they use after. The price of leaving the
 * terminal's group is that they would outlive a launcher killed with SIGKILL; the preloaded
 * orphan-guard makes each one stop itself when the launcher's IPC channel closes.
 */
export class Services {
  private readonly running: Running[] = [];
  private stopping = false;

  constructor(private readonly onUnexpectedExit: (name: string, how: string) => void) {}

  start(spec: ServiceSpec): void {
    const child = spawn(process.execPath, ['--require', GUARD, spec.script], {
      env: spec.env,
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
      detached: true,
    });
    forward(child.stdout, spec.name, process.stdout);
    forward(child.stderr, spec.name, process.stderr);
    const r: Running = {
      spec,
      child,
      exit: undefined,
      exited: new Promise<ExitInfo>((resolve) => {
        child.once('exit', (code, signal) => resolve({ code, signal }));
        // spawn itself failed (no such file, too many processes): no 'exit' will follow
        child.on('error', (err) => {
          line(spec.name, `could not start: ${err.message}`, process.stderr);
          resolve({ code: null, signal: null });
        });
      }),
      closed: new Promise<void>((resolve) => child.once('close', () => resolve())),
    };
    void r.exited.then((info) => {
      r.exit = info;
      if (!this.stopping) this.onUnexpectedExit(spec.name, describe(info));
    });
    this.running.push(r);
  }

  /**
   * Waits until every service answers its readiness URL. Resolves false when one exited
   * or `cancelled()` turned true meanwhile (the exit is reported by onUnexpectedExit).
   */
  async waitReady(timeoutMs: number, cancelled: () => boolean): Promise<boolean> {
    const until = Date.now() + timeoutMs;
    const pending = new Set(this.running);
    while (pending.size > 0) {
      if (cancelled() || this.running.some((r) => r.exit)) return false;
      for (const r of [...pending]) {
        const res = await fetch(r.spec.readyUrl, { signal: AbortSignal.timeout(1_000) }).catch(() => undefined);
        if (res?.status === 200) pending.delete(r);
        await res?.body?.cancel().catch(() => undefined);
      }
      if (pending.size === 0) break;
      if (Date.now() > until) {
        throw new Error(`not ready after ${timeoutMs / 1000} s: ${[...pending].map((r) => `${r.spec.name} (${r.spec.readyUrl})`).join(', ')}`);
      }
      await sleep(250);
    }
    return true;
  }

  /**
   * SIGTERM to every service still running, then waits; past the deadline, SIGKILL to each
   * one's whole process group (it may have started programs of its own, e.g. ffmpeg).
   * Only the service itself gets SIGTERM: it stops its own programs as part of draining.
   */
  async stop(deadlineMs: number): Promise<void> {
    this.stopping = true;
    const alive = this.running.filter((r) => !r.exit);
    for (const r of alive) r.child.kill('SIGTERM');
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<'deadline'>((resolve) => (timer = setTimeout(() => resolve('deadline'), deadlineMs)));
    const outcome = await Promise.race([Promise.all(alive.map((r) => r.exited)), deadline]);
    clearTimeout(timer);
    if (outcome === 'deadline') {
      const late = alive.filter((r) => !r.exit);
      line('dev', `${late.map((r) => r.spec.name).join(', ')} still running after ${deadlineMs} ms: killing`, process.stderr);
      this.force();
      await Promise.all(late.map((r) => r.exited));
    }
    // let the last log lines through, but never hang on a pipe a grandchild still holds
    await Promise.race([Promise.all(alive.map((r) => r.closed)), sleep(1_000)]);
    for (const r of alive) {
      const e = r.exit!;
      if (e.code !== 0) line('dev', `${r.spec.name} exited with ${describe(e)}`, process.stderr);
    }
  }

  /** SIGKILL to every service's process group. */
  force(): void {
    this.stopping = true;
    for (const r of this.running) {
      if (r.exit || r.child.pid === undefined) continue;
      try {
        process.kill(-r.child.pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  }
}
