import { setTimeout as wait } from 'node:timers/promises';

/**
 * The one retry policy and the one abortable sleep of the service (the SDKs in clients/typescript and
 * clients/python keep their own: they import nothing of ours). Here in core because every
 * layer retries something: outbound (provider calls), messaging (reconnects), db (LISTEN).
 */

/**
 * Resolves after `ms`; when `signal` aborts first (or already has), rejects at once with the
 * signal's reason, as the callers' catches expect (node's own rejects with an AbortError).
 */
export async function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  try {
    await wait(ms, undefined, signal ? { signal } : undefined);
  } catch (err) {
    throw signal?.aborted ? signal.reason : err;
  }
}

/** Capped exponential backoff: `firstMs`, doubling per attempt, never above `maxMs`. */
export interface Backoff {
  firstMs: number;
  maxMs: number;
  /**
   * 'full' draws the delay uniformly below the ceiling, so many clients that failed together do
   * not retry together; 'none' for a single connection of our own (a reconnect's log reads true).
   */
  jitter: 'full' | 'none';
}

/** The delay before retry `attempt` (0 for the first retry). */
export function backoffDelayMs(attempt: number, b: Backoff): number {
  const ceiling = Math.min(b.maxMs, b.firstMs * 2 ** attempt);
  return b.jitter === 'full' ? Math.random() * ceiling : ceiling;
}

export interface RetryOptions extends Backoff {
  /** Decides per error whether another attempt may be made. */
  retryable: (err: unknown) => boolean;
  /** Ends the waits at once (rejecting with its reason), and stops further attempts. */
  signal: AbortSignal;
  /** At most this many attempts, the first included. */
  attempts?: number;
  /** No attempt begins later than this after the first: one attempt may take its whole timeout. */
  windowMs?: number;
  /** A delay the error asks for (an answer's Retry-After), taken instead of the backoff. */
  delayHintMs?: (err: unknown) => number | undefined;
}

/** Calls `fn` until it resolves, or rejects with its last error when the options say stop. */
export async function retry<T>(fn: () => Promise<T>, o: RetryOptions): Promise<T> {
  const until = o.windowMs === undefined ? Infinity : Date.now() + o.windowMs;
  for (let attempt = 0; ; attempt++) {
    try {
      return await fn();
    } catch (err) {
      if (o.signal.aborted || !o.retryable(err) || attempt + 1 >= (o.attempts ?? Infinity)) throw err;
      const delay = o.delayHintMs?.(err) ?? backoffDelayMs(attempt, o);
      if (Date.now() + delay > until) throw err;
      await sleep(delay, o.signal);
    }
  }
}
