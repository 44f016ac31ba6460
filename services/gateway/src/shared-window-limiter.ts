import type { Knex } from 'knex';
import { LRUCache } from 'lru-cache';
import { RateLimiterMemory, RateLimiterRes } from 'rate-limiter-flexible';
import { AppError } from '@tes/core';
import { addRateLimitPoints, isOverloadError, isUnreachableError } from '@tes/db';

export interface LimitDecision {
  allowed: boolean;
  /** Points left in the window as far as this replica knows (exact with one replica). */
  remaining: number;
  msBeforeNext: number;
}

export interface SharedWindowLimiterOptions {
  /** Points per window and key. */
  points: number;
  windowSeconds: number;
  /** Prefix of the counter rows' keys (`<prefix>:<key>`). */
  keyPrefix: string;
  /** Largest block one lease takes; default points/20 (at most 1,000, at least 1). */
  maxLease?: number;
  /** How often a replica re-reads the shared counter for a key it has found exhausted. */
  recheckExhaustedMs?: number;
  /** After the shared counter failed to answer, how long the in-memory stand-in decides alone. */
  storeRetryMs?: number;
  /** Told once each time the shared counter starts failing (the stand-in takes over). */
  onStoreError?: (err: unknown) => void;
  /** Told once when a probe finds the shared counter answering again. */
  onStoreRecovered?: () => void;
  now?: () => number;
}

/** What this replica holds for one key in the current window. */
interface Slot {
  windowEnd: number;
  /** Points leased and not yet spent here. */
  tokens: number;
  /** The shared counter after this replica's last lease (every replica's leases included), at most the limit. */
  counted: number;
  /** The last lease came back short: the window is used up as of `checkedAt`. */
  exhausted: boolean;
  checkedAt: number;
  /** Size of the next lease: doubles while the key keeps using its leases up. */
  nextLease: number;
  pending?: Promise<void>;
  /** While the shared counter is unreachable: what the stand-in may still grant this key this window. */
  standInLeft?: number;
}

/** A key's slot before its first lease of a window. */
function freshSlot(nextLease: number): Slot {
  return { windowEnd: 0, tokens: 0, counted: 0, exhausted: false, checkedAt: 0, nextLease };
}

/**
 * A fixed-window limit per key whose count lives in Postgres (table `rate_limits`, shared
 * by every gateway replica) without a database write per request. A replica takes points
 * from the shared counter in blocks — a lease: one upsert adds the block to the counter and
 * answers how much of it fit under the limit — and spends them locally. The first lease of a
 * window is one point, and each lease used up doubles the next (up to `maxLease`), so a key
 * sending a request now and then costs one write per request, as before, while a busy key
 * costs one write per up to `maxLease` requests.
 *
 * The limit is never exceeded across replicas: a point is spent only after the shared
 * counter granted it. What a replica leased and did not spend by the window's end is lost,
 * so with R replicas a key may be refused up to (R − 1) × (maxLease − 1) points early
 * (≤ 5 % of the limit per extra replica with the default lease). A key found exhausted is
 * refused locally and re-checked against the shared counter at most every
 * `recheckExhaustedMs`. If Postgres is unreachable (see isUnreachableError in libs/db), an in-memory limiter
 * with the same policy stands in (per replica) until a probe, one every `storeRetryMs`, finds
 * it answering again, rather than letting traffic through unlimited or making every request
 * wait for the database in turn. The stand-in fails closed for what this replica knows: a key
 * known to be used up stays refused, and a key it holds a window for gets at most what the
 * shared counter had left for it. If Postgres answers but is overloaded (the pool's acquire
 * timeout, too many connections, a statement timeout), the request is refused with 503 and
 * Retry-After: overload is exactly when admitting more than the limit would hurt most.
 *
 * rate-limiter-flexible (used for that stand-in and the failed-auth limit) writes to its
 * store on every consume; no maintained library leases points from a shared store, hence
 * this class. The table layout is the library's (key, points, expire in ms).
 */
export class SharedWindowLimiter {
  private readonly slots: LRUCache<string, Slot>;
  private readonly insurance: RateLimiterMemory;
  private readonly maxLease: number;
  private readonly recheckMs: number;
  private readonly storeRetryMs: number;
  /** The shared counter failed and no probe has succeeded since: the stand-in decides. */
  private storeDown = false;
  /** While the counter is down, the next probe may start at this time. */
  private storeDownUntil = 0;
  private readonly now: () => number;
  private readonly windowMs: number;
  /** Database round trips made (leases and re-checks); for tests and metrics. */
  leases = 0;

  constructor(
    private readonly db: Knex,
    private readonly options: SharedWindowLimiterOptions,
  ) {
    this.windowMs = options.windowSeconds * 1000;
    this.maxLease = Math.max(1, Math.floor(options.maxLease ?? Math.min(1000, options.points / 20)));
    this.recheckMs = options.recheckExhaustedMs ?? 1000;
    this.storeRetryMs = options.storeRetryMs ?? 1000;
    this.now = options.now ?? Date.now;
    this.slots = new LRUCache<string, Slot>({ max: 100_000, ttl: 2 * this.windowMs, updateAgeOnGet: true });
    this.insurance = new RateLimiterMemory({ points: options.points, duration: options.windowSeconds, keyPrefix: options.keyPrefix });
  }

  async consume(key: string): Promise<LimitDecision> {
    // Each pass either spends a local point, refuses locally, or waits for one lease (its own
    // or a concurrent request's); waiters that find the lease spent by others lease again.
    for (;;) {
      const now = this.now();
      let slot = this.slots.get(key);
      if (slot && slot.windowEnd <= now && !slot.pending) {
        // a new window: the lease size carries over, halved, so a busy key stays cheap
        slot = freshSlot(Math.max(1, Math.floor(slot.nextLease / 2)));
        this.slots.set(key, slot);
      }
      if (slot && slot.tokens > 0) {
        slot.tokens -= 1;
        return { allowed: true, remaining: this.remaining(slot), msBeforeNext: slot.windowEnd - now };
      }
      if (slot?.pending) {
        await slot.pending;
        continue;
      }
      // a key known to be used up this window stays refused, whatever the database does
      if (slot?.exhausted && (now - slot.checkedAt < this.recheckMs || this.storeDown) && slot.windowEnd > now) {
        return { allowed: false, remaining: 0, msBeforeNext: Math.max(0, slot.windowEnd - now) };
      }
      if (this.storeDown) {
        // the shared counter is unreachable: one request at a time probes it (every
        // storeRetryMs); all others are decided by the stand-in without waiting on it
        if (now < this.storeDownUntil) return this.fallback(key, slot);
        this.storeDownUntil = now + this.storeRetryMs;
      }
      if (!slot) {
        slot = freshSlot(1);
        this.slots.set(key, slot);
      }
      const s = slot;
      const lease = this.lease(key, s).finally(() => {
        s.pending = undefined;
      });
      s.pending = lease.then(
        () => undefined,
        () => undefined,
      );
      try {
        await lease;
        if (this.storeDown) {
          this.storeDown = false;
          this.options.onStoreRecovered?.();
          for (const [, x] of this.slots.entries()) x.standInLeft = undefined;
        }
      } catch (err) {
        // Unreachable (refused, reset, shut down, read-only after a failover): the
        // per-replica stand-in decides this request and, until a probe succeeds, every other
        // one, including those that were waiting on this lease. Overloaded: refuse this one
        // (fail closed). Any other error is a fault of ours and is not hidden.
        if (isOverloadError(err)) {
          throw new AppError('service_unavailable', 'service_unavailable', {
            retryable: true,
            details: { reason: 'the rate limit cannot be checked now (database overloaded); retry shortly' },
          });
        }
        if (!isUnreachableError(err)) throw err;
        if (!this.storeDown) this.options.onStoreError?.(err);
        this.storeDown = true;
        this.storeDownUntil = this.now() + this.storeRetryMs;
        return this.fallback(key, s);
      }
      if (s.tokens === 0 && s.exhausted) return { allowed: false, remaining: 0, msBeforeNext: Math.max(0, s.windowEnd - this.now()) };
    }
  }

  /** One upsert: adds a block to the shared counter (a new window if it ended) and keeps what fit. */
  private async lease(key: string, slot: Slot): Promise<void> {
    const now = this.now();
    // an exhausted key is re-checked with one point, not a block it would mostly waste
    const size = slot.exhausted ? 1 : Math.min(slot.nextLease, this.maxLease);
    this.leases += 1;
    // the window is the database's (every replica compares it); its time left is carried
    // over to this process's clock, read before the round trip (so never later than the end)
    const { counted, msLeft } = await addRateLimitPoints(this.db, {
      key: `${this.options.keyPrefix}:${key}`,
      points: size,
      windowMs: this.windowMs,
    });
    // The counter grew by exactly `size`, so before this lease it stood at counted − size.
    const granted = Math.max(0, Math.min(size, this.options.points - (counted - size)));
    slot.windowEnd = now + msLeft;
    // what did not fit was counted but not granted: the window holds at most `points`
    slot.counted = Math.min(counted, this.options.points);
    slot.tokens += granted;
    slot.checkedAt = now;
    slot.exhausted = granted < size;
    if (!slot.exhausted) slot.nextLease = Math.min(this.maxLease, size * 2);
  }

  private remaining(slot: Slot): number {
    return Math.max(0, this.options.points - slot.counted + slot.tokens);
  }

  private async fallback(key: string, slot: Slot | undefined): Promise<LimitDecision> {
    const now = this.now();
    if (slot && slot.windowEnd > now && slot.counted > 0) {
      // this replica knows the key's window: never grant more than the counter had left
      slot.standInLeft ??= this.remaining(slot);
      if (slot.standInLeft <= 0) return { allowed: false, remaining: 0, msBeforeNext: slot.windowEnd - now };
      slot.standInLeft -= 1;
      return { allowed: true, remaining: slot.standInLeft, msBeforeNext: slot.windowEnd - now };
    }
    try {
      const r = await this.insurance.consume(key, 1);
      return { allowed: true, remaining: r.remainingPoints, msBeforeNext: r.msBeforeNext };
    } catch (rejection) {
      if (!(rejection instanceof RateLimiterRes)) throw rejection;
      return { allowed: false, remaining: 0, msBeforeNext: rejection.msBeforeNext };
    }
  }
}
