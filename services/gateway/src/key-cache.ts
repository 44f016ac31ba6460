import type { Knex } from 'knex';
import { findApiKeyByLookupId, type ApiKeyRecord } from '@tes/db';
import { LRUCache } from 'lru-cache';

/** Why a key that was valid no longer is: the code a new request with it is refused with. */
export type KeyLoss = 'platform_api_key_revoked' | 'platform_api_key_expired' | 'platform_api_key_invalid';

/** A miss, cached like a row: the value an LRU entry holds for a lookup id no key has. */
const NO_KEY = Symbol('no key');

/**
 * Key rows found by lookup id, kept at most `ttlMs` (bounded count). A revoked or expired
 * key is refused within that time on every gateway; the digest is still compared on every
 * request, so a cached row never admits a wrong secret.
 *
 * Lookup ids no key has are cached the same way (in an LRU of their own, so a flood of
 * made-up ids cannot evict the rows of real keys): an unknown id then costs what a known
 * id with a wrong secret costs, instead of a database round trip each time, which timed
 * the two apart (1.48 vs 0.79 ms in issue #18). What remains: the first lookup of an id
 * within `ttlMs` costs a round trip whether it exists or not, so timing can tell "looked
 * up here in the last ttlMs" (by anyone), not "exists"; closing that would cost a query per
 * request.
 *
 * Revocation takes effect at once on every gateway: revokeApiKey announces the key's lookup id
 * (NOTIFY) when it commits, and each gateway's KeyChangeListener calls `forget`; a key created
 * for an id cached as unknown is announced the same way. The cache is used only while that
 * listener is connected (`listening`): while it is not, changes could be missed, so every
 * request reads the row, and a new connection starts from an empty cache.
 */
export class KeyCache {
  private readonly rows: LRUCache<string, ApiKeyRecord>;
  private readonly misses: LRUCache<string, typeof NO_KEY>;
  private trusted = false;
  /**
   * Moves on every forget and every change of `listening`. A read that started before a change
   * may carry the row as it was before it (a revoked key still valid): its result is cached only
   * if no change happened while it was out.
   */
  private generation = 0;
  /** What is open under each key (event streams, waits): told when the key stops being valid. */
  private readonly watchers = new Map<string, Set<(loss: KeyLoss) => void>>();
  private recheckTimer: NodeJS.Timeout | undefined;
  constructor(
    private readonly db: Knex,
    readonly ttlMs: number,
  ) {
    this.rows = new LRUCache<string, ApiKeyRecord>({ max: 10_000, ttl: Math.max(1, ttlMs) });
    this.misses = new LRUCache<string, typeof NO_KEY>({ max: 10_000, ttl: Math.max(1, ttlMs) });
  }

  /** Whether changes are being heard; entering or leaving either way empties the cache. */
  set listening(on: boolean) {
    this.generation += 1;
    this.rows.clear();
    this.misses.clear();
    this.trusted = on;
    // a gap in hearing changes may have hidden a revocation
    for (const lookupId of this.watchers.keys()) this.recheck(lookupId);
  }

  /** A key with this lookup id changed (revoked, created). */
  forget(lookupId: string): void {
    this.generation += 1;
    this.rows.delete(lookupId);
    this.misses.delete(lookupId);
    if (this.watchers.has(lookupId)) this.recheck(lookupId);
  }

  /**
   * Tells `onLoss` once if the key stops being valid while something is open under it, the way
   * a new request would be refused: at once on a revocation's notification (forget), after a
   * gap in listening, and otherwise by a recheck every RECHECK_MS (an expiry, a notification
   * lost), so at most RECHECK_MS plus the cache's ttlMs late. Returns the unwatch.
   */
  watch(lookupId: string, onLoss: (loss: KeyLoss) => void): () => void {
    let set = this.watchers.get(lookupId);
    if (!set) this.watchers.set(lookupId, (set = new Set()));
    set.add(onLoss);
    if (!this.recheckTimer) {
      this.recheckTimer = setInterval(() => {
        for (const id of this.watchers.keys()) this.recheck(id);
      }, RECHECK_MS);
      this.recheckTimer.unref();
    }
    return () => {
      const s = this.watchers.get(lookupId);
      s?.delete(onLoss);
      if (s?.size === 0) this.watchers.delete(lookupId);
      if (this.watchers.size === 0 && this.recheckTimer) {
        clearInterval(this.recheckTimer);
        this.recheckTimer = undefined;
      }
    };
  }

  private recheck(lookupId: string): void {
    this.find(lookupId).then(
      (key) => {
        const loss = lossOf(key);
        if (!loss) return;
        const set = this.watchers.get(lookupId);
        this.watchers.delete(lookupId);
        for (const fn of set ?? []) fn(loss);
      },
      // the database is unreachable for now: the next recheck tries again
      () => undefined,
    );
  }

  async find(lookupId: string): Promise<ApiKeyRecord | null> {
    if (this.ttlMs > 0 && this.trusted) {
      const hit = this.rows.get(lookupId) ?? this.misses.get(lookupId);
      if (hit) return hit === NO_KEY ? null : hit;
    }
    const generation = this.generation;
    const key = await findApiKeyByLookupId(this.db, lookupId);
    if (this.ttlMs > 0 && this.trusted && generation === this.generation) {
      if (key) this.rows.set(lookupId, key);
      else this.misses.set(lookupId, NO_KEY);
    }
    return key;
  }
}

/** Rechecks of keys with open streams or waits, when no notification came. */
const RECHECK_MS = 5_000;

/** Why a key row (or its absence) refuses a request: as auth.ts decides, without the secret. */
function lossOf(key: ApiKeyRecord | null): KeyLoss | null {
  if (!key) return 'platform_api_key_invalid';
  if (key.revokedAt) return 'platform_api_key_revoked';
  // expiresAtMs: the time left by the database's clock when the row was read, as auth.ts judges it
  if (key.expiresAtMs !== null && key.expiresAtMs <= Date.now()) return 'platform_api_key_expired';
  return null;
}
