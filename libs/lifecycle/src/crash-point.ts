/**
 * Fault injection for the crash tests: when TES_FAULT_CRASH_AT names this point (a comma
 * list; `name@N` crashes at the N-th pass), the process SIGKILLs itself right here, as a
 * machine losing power would, with no cleanup, no flush, no shutdown. Unset in production:
 * then this is one environment lookup per call.
 */
const passes = new Map<string, number>();

export function crashPoint(name: string): void {
  const spec = process.env.TES_FAULT_CRASH_AT;
  if (!spec) return;
  for (const entry of spec.split(',')) {
    const [point, nth] = entry.trim().split('@');
    if (point !== name) continue;
    const count = (passes.get(name) ?? 0) + 1;
    passes.set(name, count);
    if (count >= Number(nth ?? 1)) {
      process.stderr.write(`crash point ${name} reached: SIGKILL\n`);
      process.kill(process.pid, 'SIGKILL');
    }
  }
}
