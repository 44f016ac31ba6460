import { backoffDelayMs, sleep, type Backoff } from '@tes/core';

/**
 * The AMQP layer's use of the one retry policy (core's), shared by reconnects and consumer
 * re-subscriptions: 200 ms, doubling, capped at 5 s, no jitter (one connection of our own).
 * Internal to this package (not re-exported).
 */
const AMQP_BACKOFF: Backoff = { firstMs: 200, maxMs: 5_000, jitter: 'none' };

export function retryDelayMs(attempt: number): number {
  return backoffDelayMs(attempt, AMQP_BACKOFF);
}

/** Waits `ms`, or less when `signal` aborts: a stop must not wait out a backoff; the loop's own checks then end it. */
export async function pause(ms: number, signal: AbortSignal): Promise<void> {
  await sleep(ms, signal).catch(() => undefined);
}
