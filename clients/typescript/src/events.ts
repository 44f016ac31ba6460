import { RateLimitedError, StreamUnavailableError, TesApiError, TesError, TesNetworkError } from './errors';
import { backoffMs, sleep, type RetryOptions } from './http';
import { SseParser } from './sse';
import type { Execution, ExecutionStatus } from './types';

/**
 * The statuses after which the gateway ends a stream. Not needs_review: an operator may still
 * resolve it, and the stream stays open for that change (run() stops at it all the same).
 */
const STREAM_END: readonly ExecutionStatus[] = ['succeeded', 'failed', 'cancelled'];
/** A server's `retry:` is honoured up to this. */
const MAX_RECONNECT_MS = 60_000;
/** No byte for this long (the gateway sends `: keep-alive` every 15 s) means a dead connection. */
export const DEFAULT_STREAM_IDLE_TIMEOUT_MS = 45_000;

export interface EventsOptions {
  /** Resume after this event id (an `id:` seen earlier, e.g. a previous stream's `lastEventId`). */
  lastEventId?: string;
  /** Stops following: the iteration rejects with the signal's reason. */
  signal?: AbortSignal;
  /** A connection that sends nothing (not even a keep-alive) this long is dropped and resumed. Default 45000. */
  idleTimeoutMs?: number;
}

/** What a stream needs from the client. */
export interface EventsDeps {
  open(path: string, options: { headers?: Record<string, string>; signal: AbortSignal }): Promise<Response>;
  execution(id: string, signal?: AbortSignal): Promise<Execution>;
  retry: RetryOptions;
}

/**
 * `GET /tools/executions/{id}/events` as an async iterable of executions, each exactly as GET
 * returns it, one per change, ending after the one with a terminal status (succeeded, failed,
 * cancelled). Iterate it once.
 *
 * A connection that drops, ends early, goes silent for idleTimeoutMs or answers 5xx is resumed
 * with `Last-Event-ID`, after the server's `retry:` delay or the client's backoff, whichever is
 * longer (the backoff grows while connections keep failing), so no change is missed or repeated across gateway restarts; `retry.maxReconnects`
 * consecutive failures end it with TesNetworkError. `429 rate_limit_exceeded` is waited out as
 * every request's is. Any other 4xx is thrown as its TesApiError (a 404 or 405 from a gateway
 * without the stream included); an answer that is not `text/event-stream` is a
 * StreamUnavailableError.
 */
export class ExecutionEvents implements AsyncIterable<Execution> {
  /** The id of the last event received: pass it as `lastEventId` to resume elsewhere. */
  lastEventId: string | undefined;
  private started = false;

  constructor(
    private readonly deps: EventsDeps,
    readonly executionId: string,
    private readonly options: EventsOptions = {},
  ) {
    this.lastEventId = options.lastEventId;
  }

  [Symbol.asyncIterator](): AsyncIterator<Execution> {
    if (this.started) throw new TypeError('events() is iterated once: call it again, with this lastEventId, to follow again');
    this.started = true;
    return this.follow();
  }

  private async *follow(): AsyncGenerator<Execution, void, undefined> {
    const { signal } = this.options;
    const { retry } = this.deps;
    const idleMs = this.options.idleTimeoutMs ?? DEFAULT_STREAM_IDLE_TIMEOUT_MS;
    const path = `/tools/executions/${encodeURIComponent(this.executionId)}/events`;
    let failures = 0;
    let rateLimitWaits = 0;
    // The server's `retry:` (the gateway says 1000): the least wait before a reconnect.
    let reconnectMs = 0;
    let lastError: unknown;
    for (;;) {
      signal?.throwIfAborted();
      const resumed = this.lastEventId !== undefined;
      const connection = new AbortController();
      const idle = new IdleTimer(idleMs, () => connection.abort(new TesNetworkError(`${path}: nothing received for ${idleMs} ms`)));
      let delivered = 0;
      let waitMs: number | undefined;
      try {
        idle.arm();
        const res = await this.deps.open(path, {
          headers: this.lastEventId !== undefined ? { 'Last-Event-ID': this.lastEventId } : {},
          signal: signal ? AbortSignal.any([signal, connection.signal]) : connection.signal,
        });
        const type = res.headers.get('content-type') ?? '';
        if (!/^text\/event-stream\b/i.test(type)) {
          await res.body?.cancel().catch(() => undefined);
          throw new StreamUnavailableError(`${path}: HTTP ${res.status} with Content-Type ${JSON.stringify(type)}, not text/event-stream`);
        }
        const parser = new SseParser();
        const reader = res.body?.getReader();
        while (reader) {
          const chunk = (await reader.read()) as { done: true; value?: undefined } | { done: false; value: Uint8Array };
          if (chunk.done) break;
          idle.arm();
          for (const event of parser.push(chunk.value)) {
            if (event.type !== 'execution') continue;
            const execution = parseExecution(event.data, path);
            if (event.lastEventId !== '') this.lastEventId = event.lastEventId;
            delivered++;
            failures = 0;
            rateLimitWaits = 0;
            // The consumer may take its time: that is not the connection being idle.
            idle.stop();
            yield execution;
            if (STREAM_END.includes(execution.status)) return;
            idle.arm();
          }
          if (parser.retryMs !== undefined) reconnectMs = Math.min(parser.retryMs, MAX_RECONNECT_MS);
        }
        // The server ended the stream before the terminal event: a gateway that stops does
        // that. So does one asked to resume after the terminal event (nothing more to say),
        // which is indistinguishable from the first case on the wire: look.
        if (delivered === 0 && resumed) {
          const now = await this.deps.execution(this.executionId, signal);
          if (STREAM_END.includes(now.status)) {
            yield now;
            return;
          }
        }
        lastError = new TesNetworkError(`${path}: the stream ended before the execution did`);
      } catch (err) {
        if (signal?.aborted) throw signal.reason;
        if (err instanceof StreamUnavailableError) throw err;
        if (err instanceof RateLimitedError && rateLimitWaits < retry.rateLimitRetries && (err.retryAfterSeconds ?? 1) * 1000 <= retry.maxRateLimitWaitMs) {
          rateLimitWaits++;
          waitMs = (err.retryAfterSeconds ?? 1) * 1000;
        } else if (
          (err instanceof TesApiError && !err.retryable) ||
          (err instanceof TesError && !(err instanceof TesApiError) && !(err instanceof TesNetworkError))
        ) {
          throw err;
        }
        lastError = err;
      } finally {
        idle.stop();
        connection.abort();
      }
      if (delivered === 0 && waitMs === undefined) failures++;
      if (failures >= retry.maxReconnects) {
        throw new TesNetworkError(`${path}: no event after ${failures} connections (${describe(lastError)})`, { cause: lastError });
      }
      await sleep(waitMs ?? Math.max(reconnectMs, backoffMs(Math.max(1, failures), retry)), signal);
    }
  }
}

function parseExecution(data: string, path: string): Execution {
  let value: unknown;
  try {
    value = JSON.parse(data);
  } catch {
    value = undefined;
  }
  const e = value as Partial<Execution> | undefined;
  if (typeof e !== 'object' || e === null || typeof e.id !== 'string' || typeof e.status !== 'string') {
    throw new TesError('invalid_response', `${path}: an execution event whose data is not an execution`);
  }
  return e as Execution;
}

class IdleTimer {
  private timer: ReturnType<typeof setTimeout> | undefined;
  constructor(
    private readonly ms: number,
    private readonly onIdle: () => void,
  ) {}
  arm(): void {
    this.stop();
    this.timer = setTimeout(this.onIdle, this.ms);
  }
  stop(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
  }
}

function describe(err: unknown): string {
  return err instanceof Error ? `${err.name}: ${err.message}` : String(err);
}
