import type { Knex } from 'knex';
import { findApiKeyByLookupId, type ApiKeyRecord } from '@tes/db';
import { LRUCache } from 'lru-cache';

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
  }

  /** A key with this lookup id changed (revoked, created). */
  forget(lookupId: string): void {
    this.generation += 1;
    this.rows.delete(lookupId);
    this.misses.delete(lookupId);
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
