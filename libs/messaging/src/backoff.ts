/**
 * The one retry policy of the AMQP layer, shared by reconnects and consumer re-subscriptions:
 * 200 ms, doubling, capped at 5 s. Internal to this package (not re-exported).
 */
export const FIRST_RETRY_MS = 200;
const MAX_RETRY_MS = 5_000;

export function nextRetry(delayMs: number): number {
  return Math.min(delayMs * 2, MAX_RETRY_MS);
}

/** Resolves after `ms`, or at once when `signal` aborts (a stop must not wait out a backoff). */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  if (signal?.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
}
