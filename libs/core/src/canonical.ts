import { hash } from 'node:crypto';

/**
 * JSON with object keys sorted at every depth: two bodies that differ only in key order
 * serialize identically. Used to compare idempotent resends and to version price lists.
 */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(sortKeys(value));
}

function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const key of Object.keys(value).sort()) {
      const v = (value as Record<string, unknown>)[key];
      if (v !== undefined) out[key] = sortKeys(v);
    }
    return out;
  }
  return value;
}

/** SHA-256 in hex, one shot (crypto.hash: no Hash object per call; ≈ 4× cheaper for short text than createHash). */
export function sha256Hex(data: string | Buffer): string {
  return hash('sha256', data);
}
