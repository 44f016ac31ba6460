import type { Logger } from '@tes/observability';
import { stopInOrder, type Stoppable } from './stop';

/**
 * What a start has brought up so far. A part is added the moment it holds something (a pool,
 * a connection, a timer, a listening port), so that a start failing part-way can stop it.
 */
export class StartedParts {
  private readonly parts: Stoppable[] = [];

  add(name: string, stop: () => Promise<void> | void): void {
    this.parts.push({ name, stop: async () => stop() });
  }

  /**
   * Stops what started, newest first: a part is stopped before the ones it was built on (the
   * consumers before their connection, everything before the pool).
   */
  stopAll(deadlineMs: number, onFailed: (part: string, err: unknown) => void): Promise<boolean> {
    return stopInOrder([...this.parts].reverse(), deadlineMs, onFailed);
  }
}

export interface StartCleanlyOptions {
  /** Where a part that fails to stop is reported (the start's own error is the caller's to log). */
  logger?: Logger;
  /** Bound on stopping what started after a failure (default 10 s). */
  deadlineMs?: number;
}

/**
 * Runs a start; if it fails part-way, stops what it had started, newest first, then rethrows
 * its error (pg-boss's start does the same). Without this a failed boot leaves a pool, a broker
 * connection, timers or a port behind: harmless to a process main.ts is about to exit, a leak
 * (and a hung jest) to a test or to anything else that carries on.
 */
export async function startCleanly<T>(start: (started: StartedParts) => Promise<T>, options: StartCleanlyOptions = {}): Promise<T> {
  const started = new StartedParts();
  try {
    return await start(started);
  } catch (err) {
    await started.stopAll(options.deadlineMs ?? 10_000, (part, stopErr) => options.logger?.warn('process.start.cleanup_failed', { part, err: stopErr }));
    throw err;
  }
}
