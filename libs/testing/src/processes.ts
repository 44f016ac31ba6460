import { readdirSync, readFileSync } from 'node:fs';
import net from 'node:net';

/**
 * Ports and child processes for the harnesses that start services as real processes: the
 * fault tests, the benchmark and the `npm start` launcher.
 */

/** Ports this process handed out already (a child may not have bound its port yet). */
const handedOut = new Set<number>();

/**
 * A free port on 127.0.0.1 for a child to bind (a hint: a child that finds it taken fails
 * loudly). Under jest, each worker draws from its own range below
 * the kernel's ephemeral range (20000 + 1000 × worker), so two test files started at once
 * never get the same port (asking the kernel for port 0 and closing it again raced: another
 * file's child could take it in between, and a readiness probe then reached the wrong
 * process). Outside jest: a kernel-assigned port.
 */
export async function freePort(): Promise<number> {
  const worker = Number(process.env.JEST_WORKER_ID ?? 0);
  if (worker > 0) {
    const base = 20_000 + ((worker - 1) % 12) * 1_000;
    for (let attempt = 0; attempt < 200; attempt++) {
      const port = base + Math.floor(Math.random() * 1_000);
      if (handedOut.has(port)) continue;
      if (await canBind(port)) {
        handedOut.add(port);
        return port;
      }
    }
  }
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

function canBind(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.once('error', () => resolve(false));
    s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
  });
}

/** Live (not zombie) children of a process, from /proc (ppid is the 4th field of /proc/<pid>/stat). */
export function childPids(pid: number): number[] {
  const out: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (Number(fields[1]) === pid && fields[0] !== 'Z') out.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return out.sort((a, b) => a - b);
}
