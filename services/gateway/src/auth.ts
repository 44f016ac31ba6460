import { randomBytes } from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';
import type { Knex } from 'knex';
import { AppError, isAppError, digestsEqual, digestSecret, parseKeySecret, type Scope } from '@tes/core';
import { findApiKeyByLookupId, type ApiKeyRecord } from '@tes/db';
import { LRUCache } from 'lru-cache';
import type { AuthContext } from './context';
import type { RequestLimits } from './rate-limit';

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

/**
 * Bearer API-key authentication. The lookup id in the secret finds the row; the SHA-256
 * digest of the presented secret is compared in constant time with the stored digest.
 * An unknown lookup id or a malformed token pays for the same digest and is compared with
 * UNKNOWN_KEY_DIGEST, so timing does not tell which part was wrong.
 *
 * Every refusal counts against the client's address (req.ip: TRUST_PROXY decides whether
 * X-Forwarded-For is believed); past the limit, refusals are 429 instead of 401. A valid key
 * is never refused for its address's failures: a shared address (NAT, a proxy) must not let
 * one client's guessing lock out the others, and a valid key is not a guess.
 */
export function authenticate(keys: KeyCache, limits: RequestLimits) {
  return async (req: Request, res: Response, next: NextFunction): Promise<void> => {
    try {
      res.locals.auth = await identify(keys, req.get('authorization'));
    } catch (err) {
      // Only a refused key counts against the address; a database outage is not the caller's.
      if (isAppError(err) && err.code.startsWith('platform_api_key_')) await limits.authFailed(req.ip ?? 'unknown', res);
      throw err;
    }
    next();
  };
}

/** A digest no secret has (random per process), compared with when no row was found. */
const UNKNOWN_KEY_DIGEST = randomBytes(32);

async function identify(keys: KeyCache, header: string | undefined): Promise<AuthContext> {
  {
    if (!header) throw new AppError('platform_api_key_missing');
    const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
    if (!m) throw new AppError('platform_api_key_invalid');
    const secret = m[1] as string;
    const presented = digestSecret(secret);
    const lookupId = parseKeySecret(secret);
    const key = lookupId ? await keys.find(lookupId) : null;
    // one constant-time comparison of two 32-byte digests on every path, found or not
    const equal = digestsEqual(presented, key ? key.digest : UNKNOWN_KEY_DIGEST);
    if (!key || !equal) throw new AppError('platform_api_key_invalid');
    if (key.revokedAt) throw new AppError('platform_api_key_revoked');
    if (key.expiresAt && Date.parse(key.expiresAt) <= Date.now()) throw new AppError('platform_api_key_expired');
    return {
      keyId: key.id,
      keyName: key.name,
      projectId: key.projectId,
      organizationId: key.organizationId,
      scopes: key.scopes,
      role: key.role,
    };
  }
}

export function requireScope(scope: Scope) {
  return (_req: Request, res: Response, next: NextFunction): void => {
    const auth = res.locals.auth as AuthContext | undefined;
    if (!auth) throw new AppError('platform_api_key_missing');
    if (!auth.scopes.includes(scope)) {
      throw new AppError('platform_api_key_scope_required', 'platform_api_key_scope_required', { details: { requiredScope: scope } });
    }
    next();
  };
}

export function authOf(res: Response): AuthContext {
  return res.locals.auth as AuthContext;
}
