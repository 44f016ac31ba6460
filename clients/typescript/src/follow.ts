import { StreamUnavailableError, TesApiError, TesNetworkError } from './errors';
import type { EventsOptions } from './events';
import { sleep } from './http';
import { isFinal, type Execution } from './types';

/**
 * How run() learns that an execution ended:
 * - `stream`: `GET …/events`, every change as it happens (errors if the stream is unusable);
 * - `wait`: `GET …` with `Prefer: wait=30` in a loop (the submit too), one answer per 30 s;
 * - `poll`: `GET …` every pollIntervalMs or the server's Retry-After, whichever is longer;
 * - `auto` (default): the stream; if it is unusable, wait; if the server ignores the wait, poll.
 */
export type RunStrategy = 'auto' | 'stream' | 'wait' | 'poll';
export const RUN_STRATEGIES: readonly RunStrategy[] = ['auto', 'stream', 'wait', 'poll'];

/** Seconds each `Prefer: wait` asks for: under the gateway's 60 s cap, and under idle timeouts of common proxies. */
export const WAIT_SECONDS = 30;
/** The gateway sends the first event at once; none within this means something holds the stream back. */
export const DEFAULT_FIRST_EVENT_TIMEOUT_MS = 5_000;
/** Unfinished answers to `Prefer: wait` that came at once without Preference-Applied, in a row, before 'auto' stops asking. */
const IGNORED_WAITS_BEFORE_POLLING = 3;

export interface PollResult {
  execution: Execution;
  retryAfterSeconds: number | undefined;
  /** The answer carried Preference-Applied: the server waited and the execution ended. */
  preferenceApplied: boolean;
}

/** The client calls that following an execution makes. */
export interface FollowClient {
  readonly pollIntervalMs: number;
  poll(id: string, signal?: AbortSignal, waitSeconds?: number): Promise<PollResult>;
  events(id: string, options: EventsOptions): AsyncIterable<Execution>;
}

export interface FollowOptions {
  strategy: RunStrategy;
  signal: AbortSignal | undefined;
  onProgress: ((execution: Execution) => void) | undefined;
  firstEventTimeoutMs: number;
  /** The submit answer's Retry-After (a 202 says 5 s): the first poll waits at least this. */
  retryAfterSeconds: number | undefined;
}

/** Follows an accepted execution with the chosen strategy until its status is final; returns it then. */
export async function followExecution(client: FollowClient, accepted: Execution, o: FollowOptions): Promise<Execution> {
  if (isFinal(accepted.status)) return accepted;
  switch (o.strategy) {
    case 'poll':
      return followPoll(client, accepted, o, o.retryAfterSeconds);
    case 'wait':
      return followWait(client, accepted, o, false);
    case 'stream':
    case 'auto': {
      const streamed = await followStream(client, accepted, o, o.strategy === 'stream');
      // Not final only when the stream was unusable and the strategy lets us wait instead.
      return streamed.final ? streamed.execution : followWait(client, streamed.execution, o, true);
    }
    default:
      throw new TypeError(`strategy must be one of ${RUN_STRATEGIES.join(', ')}, got ${JSON.stringify(o.strategy satisfies never)}`);
  }
}

/**
 * The event stream until a final status. Unusable — no first event within
 * firstEventTimeoutMs, a 404/405/406 (a gateway without it), not text/event-stream, or lost
 * for good after its reconnects — means `{ final: false }` unless `required`, then it throws.
 */
async function followStream(client: FollowClient, accepted: Execution, o: FollowOptions, required: boolean): Promise<{ execution: Execution; final: boolean }> {
  const giveUp = new AbortController();
  const timer = setTimeout(
    () => giveUp.abort(new StreamUnavailableError(`no event within ${o.firstEventTimeoutMs} ms: something between here and the gateway holds the stream back`)),
    o.firstEventTimeoutMs,
  );
  const signal = o.signal ? AbortSignal.any([o.signal, giveUp.signal]) : giveUp.signal;
  let latest = accepted;
  try {
    for await (const execution of client.events(accepted.id, { signal })) {
      clearTimeout(timer);
      latest = execution;
      o.onProgress?.(execution);
      if (isFinal(execution.status)) return { execution, final: true };
    }
  } catch (err) {
    if (o.signal?.aborted || required || !streamUnusable(err)) throw err;
  } finally {
    clearTimeout(timer);
  }
  return { execution: latest, final: false };
}

function streamUnusable(err: unknown): boolean {
  return err instanceof StreamUnavailableError || err instanceof TesNetworkError || (err instanceof TesApiError && [404, 405, 406].includes(err.status));
}

/**
 * GET with `Prefer: wait` until a final status. A server that honours it answers when the
 * execution ends or after the wait; one that ignores it answers at once (so does a gateway
 * that is shutting down, once). Answers that came at once are paced like polls, and with
 * `mayFallBack` a few of them in a row switch to plain polling.
 */
async function followWait(client: FollowClient, from: Execution, o: FollowOptions, mayFallBack: boolean): Promise<Execution> {
  let execution = from;
  let ignored = 0;
  while (!isFinal(execution.status)) {
    const started = Date.now();
    const answer = await client.poll(execution.id, o.signal, WAIT_SECONDS);
    execution = answer.execution;
    o.onProgress?.(execution);
    if (isFinal(execution.status)) break;
    if (answer.preferenceApplied || Date.now() - started >= WAIT_SECONDS * 500) {
      ignored = 0;
      continue;
    }
    ignored++;
    if (mayFallBack && ignored >= IGNORED_WAITS_BEFORE_POLLING) return followPoll(client, execution, o, answer.retryAfterSeconds);
    await sleep(pollDelayMs(client, answer.retryAfterSeconds), o.signal);
  }
  return execution;
}

/** Plain polling, never more often than pollIntervalMs (5 s by default, docs/api.md#limits) or the Retry-After. */
async function followPoll(client: FollowClient, from: Execution, o: FollowOptions, retryAfterSeconds: number | undefined): Promise<Execution> {
  let execution = from;
  let retryAfter = retryAfterSeconds;
  while (!isFinal(execution.status)) {
    await sleep(pollDelayMs(client, retryAfter), o.signal);
    ({ execution, retryAfterSeconds: retryAfter } = await client.poll(execution.id, o.signal));
    o.onProgress?.(execution);
  }
  return execution;
}

function pollDelayMs(client: FollowClient, retryAfterSeconds: number | undefined): number {
  return Math.max(client.pollIntervalMs, (retryAfterSeconds ?? 0) * 1000);
}
