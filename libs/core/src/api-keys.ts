import { hash, randomBytes, timingSafeEqual } from 'node:crypto';

/**
 * API key secrets: `tes_` + 8-char lookup id + `_` + 32 base62 characters.
 * Only the SHA-256 digest of the whole secret is stored; the lookup id finds the row,
 * the digest is compared in constant time.
 */
const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const SECRET_PATTERN = /^tes_([0-9A-Za-z]{8})_([0-9A-Za-z]{32})$/;

export const SCOPES = ['project:read', 'usage:read', 'tools:read', 'tools:execute', 'executions:read'] as const;
export type Scope = (typeof SCOPES)[number];
export const ROLES = ['ADMIN', 'MEMBER'] as const;
export type Role = (typeof ROLES)[number];

export function isScope(value: unknown): value is Scope {
  return typeof value === 'string' && (SCOPES as readonly string[]).includes(value);
}

function randomBase62(length: number): string {
  // Rejection sampling: 62 does not divide 256, so bytes >= 248 are discarded to stay uniform.
  let out = '';
  while (out.length < length) {
    for (const byte of randomBytes(length * 2)) {
      if (byte < 248 && out.length < length) out += BASE62[byte % 62]!;
    }
  }
  return out;
}

export interface NewKeySecret {
  lookupId: string;
  secret: string;
  digest: Buffer;
}

export function generateKeySecret(): NewKeySecret {
  const lookupId = randomBase62(8);
  const secret = `tes_${lookupId}_${randomBase62(32)}`;
  return { lookupId, secret, digest: digestSecret(secret) };
}

/** The lookup id of a well-formed secret, or null. */
export function parseKeySecret(secret: string): string | null {
  const m = SECRET_PATTERN.exec(secret);
  return m ? m[1]! : null;
}

/** The SHA-256 of a secret (UTF-8), computed on every keyed request: one shot, no Hash object. */
export function digestSecret(secret: string): Buffer {
  return hash('sha256', secret, 'buffer');
}

export function digestsEqual(a: Buffer, b: Buffer): boolean {
  return a.length === b.length && timingSafeEqual(a, b);
}
