import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import os from 'node:os';

/**
 * --taskset: pins the shared servers (every PostgreSQL and RabbitMQ process, all their threads)
 * and the harness itself (its embedded S3) to the stack's CPUs for the run, and gives them all
 * CPUs back at the end. Backends PostgreSQL forks meanwhile inherit the postmaster's affinity,
 * which is why every process is set again on the way back. Needs root for the servers
 * (they run as other users); a process that cannot be pinned is named, not fatal.
 */
function serverPids(): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let comm: string;
    try {
      comm = readFileSync(`/proc/${entry}/comm`, 'utf8').trim();
    } catch {
      continue;
    }
    if (comm === 'postgres' || comm === 'postmaster' || comm === 'beam.smp' || comm.startsWith('erl_') || comm === 'epmd') pids.push(Number(entry));
  }
  return pids;
}

function setAffinity(pids: number[], cpus: string): string[] {
  const failed: string[] = [];
  for (const pid of pids) {
    try {
      execFileSync('taskset', ['-a', '-p', '-c', cpus, String(pid)], { stdio: 'ignore' });
    } catch {
      failed.push(String(pid)); // gone meanwhile, or not ours to pin
    }
  }
  return failed;
}

/** Pins the servers and this process to `cpus`; returns a note of what could not be pinned. */
export function pinServers(cpus: string): string | undefined {
  const failed = setAffinity([...serverPids(), process.pid], cpus);
  return failed.length ? `--taskset: could not pin pids ${failed.join(', ')}` : undefined;
}

/** Every server process (and this one) back on every CPU. */
export function unpinServers(): void {
  setAffinity([...serverPids(), process.pid], `0-${os.cpus().length - 1}`);
}
