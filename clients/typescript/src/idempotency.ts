import { randomUUID } from 'node:crypto';

/** The contract's Idempotency-Key form: 8-128 of letters, digits, `.`, `_`, `:`, `-`. */
export const IDEMPOTENCY_KEY_PATTERN = /^[A-Za-z0-9._:-]{8,128}$/;

/**
 * A fresh key for one logical submit. It must be made once per run and reused for every
 * resend of that submit: a new key on a resend is a second paid execution.
 */
export function newIdempotencyKey(prefix = 'tes'): string {
  const key = `${prefix}-${randomUUID()}`;
  if (!IDEMPOTENCY_KEY_PATTERN.test(key)) throw new TypeError(`idempotency key prefix ${JSON.stringify(prefix)} gives an invalid key`);
  return key;
}

export function isValidIdempotencyKey(key: string): boolean {
  return IDEMPOTENCY_KEY_PATTERN.test(key);
}
