import dns from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import { retry } from '@tes/core';
import { BlockedAddressError, checkAddress } from './address';

/** A response with a status outside 2xx. */
export class HttpStatusError extends Error {
  constructor(
    readonly status: number,
    readonly body: string,
    readonly retryAfterMs: number | undefined,
  ) {
    super(`HTTP ${status}: ${body.slice(0, 300)}`);
    this.name = 'HttpStatusError';
  }
}

export interface HttpResponse {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

export interface RequestOptions {
  headers?: Record<string, string>;
  body?: Buffer | string;
  signal: AbortSignal;
  /** Socket idle timeout (default 30 s): ends a request only when nothing at all arrives for this long. */
  timeoutMs?: number;
  /**
   * Whole-request deadline: connecting, sending, the answer's headers and its whole body (and
   * every redirect hop) must be done within this, however slowly the other side trickles bytes.
   * An idle timeout alone never ends a peer that sends one byte just inside it.
   */
  deadlineMs?: number;
  maxBytes?: number;
}

export interface GuardedHttpOptions {
  /** Tests and local development talk to loopback; production never reaches private networks. */
  allowPrivateNetworks: boolean;
}

/**
 * HTTP for everything we send to addresses others chose: providers' APIs and the output URLs
 * they hand back (the worker), webhook endpoints (the relay). Every address a name resolves to
 * is checked before connecting, inside the
 * connection's own lookup, so DNS rebinding cannot slip a private address in between the
 * check and the connect: loopback, private, link-local (cloud metadata) and other non-public
 * ranges are refused unless explicitly allowed (addressRefusal in address.ts has the rule). Redirects are followed by hand, each hop
 * checked the same way. Bodies are capped.
 */
export class GuardedHttp {
  constructor(private readonly o: GuardedHttpOptions) {}

  request(method: string, url: string, r: RequestOptions, redirects = 3): Promise<HttpResponse> {
    const deadline = r.deadlineMs === undefined ? undefined : { at: Date.now() + r.deadlineMs, ms: r.deadlineMs };
    return this.follow(method, url, r, redirects, deadline);
  }

  private async follow(method: string, url: string, r: RequestOptions, redirects: number, deadline: Deadline | undefined): Promise<HttpResponse> {
    const res = await this.once(method, url, r, deadline);
    if ([301, 302, 303, 307, 308].includes(res.status) && res.headers.location && redirects > 0) {
      const next = new URL(res.headers.location, url).toString();
      return this.follow(res.status === 303 ? 'GET' : method, next, r, redirects - 1, deadline);
    }
    return res;
  }

  private once(method: string, url: string, r: RequestOptions, deadline: Deadline | undefined): Promise<HttpResponse> {
    const u = new URL(url);
    if (u.protocol !== 'https:' && u.protocol !== 'http:') return Promise.reject(new Error(`unsupported URL scheme ${u.protocol}`));
    const host = u.hostname.replace(/^\[|\]$/g, '');
    const allow = this.o.allowPrivateNetworks;
    try {
      // An IP literal never goes through lookup: check it here.
      if (net.isIP(host)) checkAddress(host, host, allow);
    } catch (err) {
      return Promise.reject(err);
    }
    const lookup: net.LookupFunction = (hostname, options, callback) => {
      dns.lookup(hostname, { ...options, all: true }, (err, addresses) => {
        if (err) return callback(err, '', 4);
        try {
          for (const a of addresses) checkAddress(hostname, a.address, allow);
        } catch (e) {
          return callback(e as NodeJS.ErrnoException, '', 4);
        }
        if ((options as { all?: boolean }).all) return (callback as unknown as (e: null, a: dns.LookupAddress[]) => void)(null, addresses);
        const first = addresses[0]!;
        callback(null, first.address, first.family);
      });
    };
    const maxBytes = r.maxBytes ?? 64 * 1024 * 1024;
    const mod = u.protocol === 'https:' ? https : http;
    let timer: NodeJS.Timeout | undefined;
    const answer = new Promise<HttpResponse>((resolve, reject) => {
      const req = mod.request(u, { method, headers: r.headers, lookup, signal: r.signal, timeout: r.timeoutMs ?? 30_000 }, (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        let tooLarge = false;
        res.on('data', (c: Buffer) => {
          size += c.length;
          if (size > maxBytes) {
            tooLarge = true;
            res.destroy();
            return;
          }
          chunks.push(c);
        });
        const finish = () => {
          if (tooLarge) reject(new Error(`response larger than ${maxBytes} bytes`));
          else resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) });
        };
        res.on('end', finish);
        res.on('close', () => {
          if (tooLarge) finish();
        });
        res.on('error', reject);
      });
      req.on('timeout', () => req.destroy(new Error('request timed out')));
      req.on('error', reject);
      if (deadline) {
        // rejects first, with its own reason; destroying the request also ends a response being read
        const passed = () => {
          reject(new Error(`no complete answer within the ${deadline.ms} ms deadline`));
          req.destroy();
        };
        timer = setTimeout(passed, Math.max(0, deadline.at - Date.now()));
      }
      req.end(r.body);
    });
    return answer.finally(() => clearTimeout(timer));
  }

  /** JSON request; non-2xx statuses reject with HttpStatusError. */
  async json<T>(method: string, url: string, r: RequestOptions & { json?: unknown }): Promise<T> {
    const body = r.json === undefined ? r.body : JSON.stringify(r.json);
    const headers = { Accept: 'application/json', ...(r.json !== undefined ? { 'Content-Type': 'application/json' } : {}), ...r.headers };
    const res = await this.request(method, url, { ...r, headers, ...(body !== undefined ? { body } : {}) });
    if (res.status < 200 || res.status >= 300) throw new HttpStatusError(res.status, res.body.toString('utf8'), retryAfterMs(res.headers));
    return JSON.parse(res.body.toString('utf8')) as T;
  }
}

interface Deadline {
  /** Date.now() by which the whole request ends. */
  at: number;
  ms: number;
}

/** A Retry-After header (seconds or an HTTP date) in milliseconds. */
export function retryAfterMs(headers: http.IncomingHttpHeaders): number | undefined {
  const v = headers['retry-after'];
  if (typeof v !== 'string') return undefined;
  const seconds = Number(v);
  if (Number.isFinite(seconds)) return seconds * 1000;
  const at = Date.parse(v);
  return Number.isNaN(at) ? undefined : Math.max(0, at - Date.now());
}

/** Provider calls' retry policy: 200 ms doubling to 5 s, full jitter (many steps fail together). */
const PROVIDER_BACKOFF = { firstMs: 200, maxMs: 5_000, jitter: 'full' } as const;

/** The answer's Retry-After, up to 10 s. */
function retryAfterHint(err: unknown): number | undefined {
  const wait = err instanceof HttpStatusError ? err.retryAfterMs : undefined;
  return wait === undefined ? undefined : Math.min(wait, 10_000);
}

/**
 * Bounded retries (at most `attempts`, honouring Retry-After up to 10 s). `retryable` decides
 * per error; requests that may have had an effect must not be retried (a provider POST that
 * failed with a 500 may have created a job). The waits end at once when `signal` aborts.
 */
export async function withRetries<T>(fn: () => Promise<T>, retryable: (err: unknown) => boolean, signal: AbortSignal, attempts = 4): Promise<T> {
  return retry(fn, { ...PROVIDER_BACKOFF, retryable, signal, attempts, delayHintMs: retryAfterHint });
}

/**
 * Retries `fn` while `retryable` says so (backoff capped at 2 s, or the answer's Retry-After),
 * starting a new attempt only while it would begin within `windowMs` of the first. A window
 * rather than an attempt count bounds the time: one attempt may take its whole request timeout,
 * and the caller's step has a deadline of its own. Rejects with the last error.
 */
export async function retryWithin<T>(fn: () => Promise<T>, retryable: (err: unknown) => boolean, signal: AbortSignal, windowMs: number): Promise<T> {
  return retry(fn, {
    ...PROVIDER_BACKOFF,
    maxMs: 2_000,
    retryable,
    signal,
    windowMs,
    delayHintMs: (err) => (err instanceof HttpStatusError ? err.retryAfterMs : undefined),
  });
}

/** Safe to retry for reads: rate limits, timeouts, server errors and network failures. */
export function retryableRead(err: unknown): boolean {
  if (err instanceof BlockedAddressError) return false;
  if (err instanceof HttpStatusError) return err.status === 408 || err.status === 429 || err.status >= 500;
  return true;
}

/**
 * Safe to retry for a request that creates provider work: only answers that say the request
 * was not taken (429, 503). Anything else after sending may have created a job.
 */
export function retryableCreate(err: unknown): boolean {
  return err instanceof HttpStatusError && (err.status === 429 || err.status === 503);
}
