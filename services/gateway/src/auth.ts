import type { NextFunction, Request, Response } from 'express';
import type { Knex } from 'knex';
import { AppError, isAppError, digestsEqual, digestSecret, parseKeySecret, type Scope } from '@tes/core';
import { findApiKeyByLookupId, type ApiKeyRecord } from '@tes/db';
import { LRUCache } from 'lru-cache';
import type { AuthContext } from './context';
import type { RequestLimits } from './rate-limit';

/**
 * Bearer API-key authentication. The lookup id in the secret finds the row; the SHA-256
 * digest of the presented secret is compared in constant time with the stored digest.
 * Unknown lookup ids still pay for a digest, so timing does not tell which part was wrong.
 */
/**
 * Key rows found by lookup id, kept at most `ttlMs` (bounded count). A revoked or expired
 * key is refused within that time on every gateway; the digest is still compared on every
 * request, so a cached row never admits a wrong secret.
 */
export class KeyCache {
  private readonly cache: LRUCache<string, ApiKeyRecord>;
  constructor(
    private readonly db: Knex,
    readonly ttlMs: number,
  ) {
    this.cache = new LRUCache<string, ApiKeyRecord>({ max: 10_000, ttl: Math.max(1, ttlMs) });
  }

  async find(lookupId: string): Promise<ApiKeyRecord | null> {
    if (this.ttlMs > 0) {
      const hit = this.cache.get(lookupId);
      if (hit) return hit;
    }
    const key = await findApiKeyByLookupId(this.db, lookupId);
    if (key && this.ttlMs > 0) this.cache.set(lookupId, key);
    return key;
  }
}

export function authenticate(keys: KeyCache, limits: RequestLimits) {
  return async (req: Request, res: Response, next: NextFunction): Promise<void> => {
    const ip = req.ip ?? 'unknown';
    await limits.checkAuthFailures(ip, res);
    try {
      res.locals.auth = await identify(keys, req.get('authorization'));
    } catch (err) {
      // Only a refused key counts against the address; a database outage is not the caller's.
      if (isAppError(err) && err.code.startsWith('platform_api_key_')) await limits.recordAuthFailure(ip);
      throw err;
    }
    next();
  };
}

async function identify(keys: KeyCache, header: string | undefined): Promise<AuthContext> {
  {
    if (!header) throw new AppError('platform_api_key_missing');
    const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
    if (!m) throw new AppError('platform_api_key_invalid');
    const secret = m[1] as string;
    const presented = digestSecret(secret);
    const lookupId = parseKeySecret(secret);
    const key = lookupId ? await keys.find(lookupId) : null;
    if (!key || !digestsEqual(presented, key.digest)) throw new AppError('platform_api_key_invalid');
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
