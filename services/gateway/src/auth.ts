import { randomBytes } from 'node:crypto';
import type { Request, Response } from 'express';
import { AppError, isAppError, digestsEqual, digestSecret, parseKeySecret, type Scope } from '@tes/core';
import type { AuthContext } from './context';
import type { KeyCache } from './key-cache';
import type { RequestLimits } from './rate-limit';

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
export async function authenticate(keys: KeyCache, limits: RequestLimits, req: Request, res: Response): Promise<AuthContext> {
  try {
    return await identify(keys, req.get('authorization'));
  } catch (err) {
    // Only a refused key counts against the address; a database outage is not the caller's.
    if (isAppError(err) && err.code.startsWith('platform_api_key_')) await limits.authFailed(req.ip ?? 'unknown', res);
    throw err;
  }
}

/** A digest no secret has (random per process), compared with when no row was found. */
const UNKNOWN_KEY_DIGEST = randomBytes(32);

async function identify(keys: KeyCache, header: string | undefined): Promise<AuthContext> {
  {
    if (!header) throw new AppError('platform_api_key_missing');
    const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
    if (!m) throw new AppError('platform_api_key_invalid');
    const secret = m[1]!;
    const presented = digestSecret(secret);
    const lookupId = parseKeySecret(secret);
    const key = lookupId ? await keys.find(lookupId) : null;
    // one constant-time comparison of two 32-byte digests on every path, found or not
    const equal = digestsEqual(presented, key ? key.digest : UNKNOWN_KEY_DIGEST);
    if (!key || !lookupId || !equal) throw new AppError('platform_api_key_invalid');
    if (key.revokedAt) throw new AppError('platform_api_key_revoked');
    // expired by the database's clock (carried over to this process's when the row was read)
    if (key.expiresAtMs !== null && key.expiresAtMs <= Date.now()) throw new AppError('platform_api_key_expired');
    return {
      keyId: key.id,
      lookupId,
      keyName: key.name,
      projectId: key.projectId,
      organizationId: key.organizationId,
      scopes: key.scopes,
      role: key.role,
    };
  }
}

/** Refuses a key without `scope` (403). */
export function requireScope(auth: AuthContext, scope: Scope): void {
  if (!auth.scopes.includes(scope)) {
    throw new AppError('platform_api_key_scope_required', 'platform_api_key_scope_required', { details: { requiredScope: scope } });
  }
}
