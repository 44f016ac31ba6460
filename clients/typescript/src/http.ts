import { errorFromResponse, RateLimitedError, TesError, TesNetworkError } from './errors';

/** The slice of the WHATWG fetch this package uses; pass your own to add a proxy, logging or tests. */
export type FetchLike = (input: string, init: RequestInit) => Promise<Response>;

export interface RetryOptions {
  /** Sends of one request on a lost connection or a retryable 5xx, the first included. */
  maxAttempts: number;
  /** First backoff; it doubles per attempt up to maxDelayMs, with ±25 % jitter. */
  baseDelayMs: number;
  maxDelayMs: number;
  /** How many `429 rate_limit_exceeded` answers one request waits out. */
  rateLimitRetries: number;
  /** A Retry-After longer than this is not waited out: the RateLimitedError is thrown. */
  maxRateLimitWaitMs: number;
  /** Per-send deadline; a send that exceeds it counts as a lost connection. A `Prefer: wait` send gets its wait on top. */
  attemptTimeoutMs: number;
  /**
   * Consecutive failed connections of an event stream (refused, dropped before an event, a
   * 5xx) before events() gives up; a connection that delivers an event resets the count.
   * More than maxAttempts because a stream outlives restarts of the gateway it talks to.
   */
  maxReconnects: number;
}

export const DEFAULT_RETRY: RetryOptions = {
  maxAttempts: 4,
  baseDelayMs: 500,
  maxDelayMs: 8_000,
  rateLimitRetries: 2,
  maxRateLimitWaitMs: 60_000,
  attemptTimeoutMs: 60_000,
  maxReconnects: 8,
};

export interface HttpResponse<T> {
  status: number;
  headers: Headers;
  body: T;
}

export interface RequestOptions {
  body?: unknown;
  headers?: Record<string, string>;
  signal?: AbortSignal | undefined;
  /**
   * Sends `Prefer: wait=N` (RFC 7240): the gateway may hold the answer up to N seconds, so
   * each send's deadline is attemptTimeoutMs plus N seconds.
   */
  waitSeconds?: number | undefined;
}

/** Resolves after `ms`, or rejects with the signal's reason as soon as it fires. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  if (signal?.aborted) return Promise.reject(signal.reason);
  return new Promise((resolve, reject) => {
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

export function backoffMs(attempt: number, retry: RetryOptions): number {
  const base = Math.min(retry.maxDelayMs, retry.baseDelayMs * 2 ** Math.max(0, attempt - 1));
  return Math.round(base * (0.75 + Math.random() * 0.5));
}

/**
 * Sends requests to the API with the key in the Authorization header (never in the URL)
 * and retries what is safe to retry:
 * - a lost connection or a 5xx (except 503 execution_disabled): the SAME bytes are sent
 *   again, so a paid submit keeps its Idempotency-Key and body and the gateway answers a
 *   resend with the original execution;
 * - `429 rate_limit_exceeded`: after its Retry-After, a bounded number of times;
 * - never the money 429s (insufficient_balance, monthly_cap_exceeded) nor any 4xx: the
 *   same request cannot succeed, and looping would only burn the rate limit.
 */
export class Transport {
  readonly #apiKey: string;
  readonly baseUrl: string;
  private readonly fetchFn: FetchLike;
  private readonly retry: RetryOptions;
  private readonly userAgent: string;

  constructor(options: { apiKey: string; baseUrl: string; fetch: FetchLike; retry: RetryOptions; userAgent: string }) {
    this.#apiKey = options.apiKey;
    this.baseUrl = options.baseUrl;
    this.fetchFn = options.fetch;
    this.retry = options.retry;
    this.userAgent = options.userAgent;
  }

  async request<T>(method: string, path: string, options: RequestOptions = {}): Promise<HttpResponse<T>> {
    // Serialised once: every resend carries byte-identical content.
    const payload = options.body === undefined ? undefined : JSON.stringify(options.body);
    const headers: Record<string, string> = {
      Accept: 'application/json',
      'User-Agent': this.userAgent,
      ...options.headers,
      Authorization: `Bearer ${this.#apiKey}`,
    };
    if (payload !== undefined) headers['Content-Type'] = 'application/json';
    if (options.waitSeconds !== undefined) headers.Prefer = `wait=${options.waitSeconds}`;
    const url = this.baseUrl + path;
    let rateLimitWaits = 0;
    for (let attempt = 1; ; attempt++) {
      let res: Response;
      let text: string;
      const timeout = AbortSignal.timeout(this.retry.attemptTimeoutMs + (options.waitSeconds ?? 0) * 1000);
      const signal = options.signal ? AbortSignal.any([options.signal, timeout]) : timeout;
      try {
        res = await this.fetchFn(url, { method, headers, body: payload, signal, redirect: 'error' });
        text = await res.text();
      } catch (err) {
        if (options.signal?.aborted) throw options.signal.reason;
        // No answer (or half of one): the request may or may not have been applied.
        if (attempt >= this.retry.maxAttempts) {
          throw new TesNetworkError(`${method} ${path}: no answer after ${attempt} attempts (${describe(err)})`, { cause: err });
        }
        await sleep(backoffMs(attempt, this.retry), options.signal);
        continue;
      }
      const body = parseJson(text);
      if (res.ok) {
        if (body === undefined) throw new TesError('invalid_response', `${method} ${path}: HTTP ${res.status} without a JSON body`);
        return { status: res.status, headers: res.headers, body: body as T };
      }
      const error = errorFromResponse(res.status, body, res.headers);
      if (error instanceof RateLimitedError) {
        const waitMs = (error.retryAfterSeconds ?? 1) * 1000;
        if (rateLimitWaits >= this.retry.rateLimitRetries || waitMs > this.retry.maxRateLimitWaitMs) throw error;
        rateLimitWaits++;
        await sleep(waitMs, options.signal);
        attempt--; // a rate-limit wait is not a failed attempt
        continue;
      }
      if (error.retryable && attempt < this.retry.maxAttempts) {
        await sleep(Math.max(backoffMs(attempt, this.retry), (error.retryAfterSeconds ?? 0) * 1000), options.signal);
        continue;
      }
      throw error;
    }
  }

  /**
   * One streaming GET (`Accept: text/event-stream`) with the key in the Authorization header,
   * answered with the Response whose body is still unread. No retries here: whoever reads
   * the stream knows where to resume (events.ts). An error answer is thrown as its TesApiError.
   */
  async open(path: string, options: { headers?: Record<string, string>; signal: AbortSignal }): Promise<Response> {
    const headers: Record<string, string> = {
      Accept: 'text/event-stream',
      'Cache-Control': 'no-cache',
      'User-Agent': this.userAgent,
      ...options.headers,
      Authorization: `Bearer ${this.#apiKey}`,
    };
    const res = await this.fetchFn(this.baseUrl + path, { method: 'GET', headers, signal: options.signal, redirect: 'error' });
    if (res.ok) return res;
    const text = await res.text().catch(() => '');
    throw errorFromResponse(res.status, parseJson(text), res.headers);
  }
}

function parseJson(text: string): unknown {
  if (text === '') return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

function describe(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const cause = err.cause instanceof Error ? `: ${err.cause.message}` : '';
  return `${err.name}: ${err.message}${cause}`;
}
