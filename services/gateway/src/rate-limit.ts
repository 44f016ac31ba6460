import type { Response } from 'express';
import type { Knex } from 'knex';
import { RateLimiterMemory } from 'rate-limiter-flexible';
import { AppError } from '@tes/core';
import type { Logger } from '@tes/observability';
import type { AuthContext } from './context';
import { SharedWindowLimiter, type LimitDecision } from './shared-window-limiter';

const WINDOW_SECONDS = 60;
/** Failed authentications per client address per minute answered 401; later ones get 429. */
export const AUTH_FAILURES_PER_MINUTE = 30;

/**
 * Request-rate limits:
 *  - per API key, N requests per fixed one-minute window, counted in Postgres so every
 *    gateway replica shares the count (table rate_limits), taken in leased blocks so a busy
 *    key does not cost a database write per request (SharedWindowLimiter); if Postgres
 *    cannot answer, an in-memory limiter with the same policy stands in rather than letting
 *    traffic through unlimited;
 *  - per client address, failed authentications, so keys cannot be guessed at speed: past
 *    the limit a refused key is answered 429 with Retry-After. Only refusals are limited,
 *    never a valid key (see authenticate). Kept in memory per replica: it needs no shared
 *    accuracy, and an attacker's junk must not cost database writes.
 */
export class RequestLimits {
  private readonly perKeyWindow: SharedWindowLimiter;
  /** The RateLimit-Limit and RateLimit-Policy values, the same on every answer. */
  private readonly limitHeader: string;
  private readonly policyHeader: string;
  private readonly authFailures = new RateLimiterMemory({ points: AUTH_FAILURES_PER_MINUTE, duration: WINDOW_SECONDS, keyPrefix: 'authfail' });

  constructor(
    db: Knex,
    readonly perMinute: number,
    logger?: Logger,
  ) {
    this.limitHeader = String(perMinute);
    this.policyHeader = `${perMinute};w=${WINDOW_SECONDS}`;
    this.perKeyWindow = new SharedWindowLimiter(db, {
      points: perMinute,
      windowSeconds: WINDOW_SECONDS,
      keyPrefix: 'key',
      onStoreError: (err) => logger?.warn('gateway.rate_limit.store_unavailable', { err: (err as Error).message, fallback: 'in-memory limit per process' }),
      onStoreRecovered: () => logger?.info('gateway.rate_limit.store_recovered', {}),
    });
  }

  private headers(res: Response, r: LimitDecision): void {
    res.setHeader('RateLimit-Limit', this.limitHeader);
    res.setHeader('RateLimit-Remaining', String(Math.max(0, r.remaining)));
    res.setHeader('RateLimit-Reset', String(Math.max(0, Math.ceil(r.msBeforeNext / 1000))));
    res.setHeader('RateLimit-Policy', this.policyHeader);
  }

  /** Counts the request against the caller's key; 429 with Retry-After past the limit. */
  async perKey(res: Response, auth: AuthContext): Promise<void> {
    const r = await this.perKeyWindow.consume(auth.keyId);
    this.headers(res, r);
    if (!r.allowed) {
      res.setHeader('Retry-After', String(Math.max(1, Math.ceil(r.msBeforeNext / 1000))));
      throw new AppError('rate_limit_exceeded', 'rate_limit_exceeded', {
        retryable: true,
        details: { limit: this.perMinute, windowSeconds: WINDOW_SECONDS },
      });
    }
  }

  /**
   * Counts a refused authentication from `ip`. Past AUTH_FAILURES_PER_MINUTE this minute it
   * throws 429 with Retry-After (the caller throws its 401 otherwise).
   */
  async authFailed(ip: string, res: Response): Promise<void> {
    const r = await this.authFailures.penalty(ip, 1);
    if (r.consumedPoints > AUTH_FAILURES_PER_MINUTE) {
      res.set('Retry-After', String(Math.max(1, Math.ceil(r.msBeforeNext / 1000))));
      throw new AppError('rate_limit_exceeded', 'rate_limit_exceeded', { retryable: true, details: { reason: 'too many failed authentications' } });
    }
  }
}
