import { createHash } from 'node:crypto';
import {
  canMove,
  canonicalJson,
  ceilDiv,
  digestSecret,
  digestsEqual,
  EXECUTION_STATUSES,
  formatUsd,
  generateKeySecret,
  isId,
  isTerminal,
  newId,
  parseKeySecret,
  statesThatMoveTo,
  TERMINAL_STATUSES,
  toMicros,
  type ExecutionStatus,
} from '@tes/core';

const CROCKFORD_ULID = /^[0-9A-HJKMNP-TV-Z]{26}$/;

describe('ids', () => {
  it('newId is the prefix, an underscore and a 26-character Crockford ULID', () => {
    const id = newId('exe');
    expect(id.startsWith('exe_')).toBe(true);
    expect(id.slice(4)).toMatch(CROCKFORD_ULID);
    expect(newId('org')).toMatch(/^org_[0-9A-HJKMNP-TV-Z]{26}$/);
  });

  it('ids made one after another sort in creation order, even within one millisecond', () => {
    const ids = Array.from({ length: 2_000 }, () => newId('exe'));
    expect(new Set(ids).size).toBe(ids.length);
    expect([...ids].sort()).toEqual(ids);
  });

  it("the random part of a new millisecond's id is spread over every symbol (the pooled random source)", async () => {
    const firstSymbols = new Set<string>();
    for (let i = 0; i < 200; i++) {
      await new Promise((r) => setTimeout(r, 1)); // a new millisecond: a fresh random part, not an increment
      firstSymbols.add(newId('exe').slice(4 + 10, 4 + 11));
    }
    // 200 draws over 32 symbols leave out fewer than 3 on average
    expect(firstSymbols.size).toBeGreaterThanOrEqual(24);
  });

  it('isId accepts only the exact shape with the right prefix', () => {
    const id = newId('exe');
    expect(isId('exe', id)).toBe(true);
    expect(isId('art', id)).toBe(false);
    expect(isId('exe', `${id}0`)).toBe(false);
    expect(isId('exe', id.slice(0, -1))).toBe(false);
    expect(isId('exe', id.toLowerCase())).toBe(false);
    // I, L, O and U are not Crockford base32 digits
    expect(isId('exe', `exe_${'I'.repeat(26)}`)).toBe(false);
    expect(isId('exe', ` ${id}`)).toBe(false);
    expect(isId('exe', 42)).toBe(false);
    expect(isId('exe', null)).toBe(false);
  });
});

describe('execution states', () => {
  // The moves table of docs/api.md#states-and-moves, written out independently.
  const CONTRACT: Record<ExecutionStatus, ExecutionStatus[]> = {
    queued: ['running', 'cancelled', 'failed'],
    running: ['waiting', 'succeeded', 'failed', 'cancelled', 'needs_review'],
    waiting: ['running', 'succeeded', 'failed', 'cancelled', 'needs_review'],
    needs_review: ['succeeded', 'failed'],
    succeeded: [],
    failed: [],
    cancelled: [],
  };

  it('canMove allows exactly the moves of the contract, for every pair of states', () => {
    const allowed: string[] = [];
    for (const from of EXECUTION_STATUSES) {
      for (const to of EXECUTION_STATUSES) if (canMove(from, to)) allowed.push(`${from}->${to}`);
    }
    const expected = Object.entries(CONTRACT).flatMap(([from, tos]) => tos.map((to) => `${from}->${to}`));
    expect(allowed.sort()).toEqual(expected.sort());
  });

  it('terminal states are succeeded, failed and cancelled, and none of them moves anywhere', () => {
    expect([...TERMINAL_STATUSES].sort()).toEqual(['cancelled', 'failed', 'succeeded']);
    for (const from of TERMINAL_STATUSES) {
      expect(isTerminal(from)).toBe(true);
      for (const to of EXECUTION_STATUSES) expect(canMove(from, to)).toBe(false);
    }
    // needs_review holds money until an operator resolves it: not terminal
    expect(isTerminal('needs_review')).toBe(false);
  });

  it('statesThatMoveTo lists the states each state can be reached from', () => {
    expect(statesThatMoveTo('running').sort()).toEqual(['queued', 'waiting']);
    expect(statesThatMoveTo('succeeded').sort()).toEqual(['needs_review', 'running', 'waiting']);
    expect(statesThatMoveTo('cancelled').sort()).toEqual(['queued', 'running', 'waiting']);
    expect(statesThatMoveTo('needs_review').sort()).toEqual(['running', 'waiting']);
    expect(statesThatMoveTo('queued')).toEqual([]);
    for (const to of EXECUTION_STATUSES) {
      const expected = EXECUTION_STATUSES.filter((from) => CONTRACT[from].includes(to));
      expect(statesThatMoveTo(to).sort()).toEqual([...expected].sort());
    }
  });
});

describe('money', () => {
  it('formatUsd prints dollars without float noise', () => {
    expect(formatUsd(0)).toBe('$0');
    expect(formatUsd(1)).toBe('$0.000001');
    expect(formatUsd(1_000)).toBe('$0.001');
    expect(formatUsd(2_000)).toBe('$0.002');
    expect(formatUsd(100_000)).toBe('$0.10');
    expect(formatUsd(1_000_000)).toBe('$1');
    expect(formatUsd(1_500_000)).toBe('$1.50');
    expect(formatUsd(12_345_678)).toBe('$12.345678');
  });

  it('ceilDiv rounds up to the next whole unit and refuses a non-positive divisor', () => {
    expect(ceilDiv(0, 1_000_000)).toBe(0);
    expect(ceilDiv(1, 1_000_000)).toBe(1);
    expect(ceilDiv(1_000_000, 1_000_000)).toBe(1);
    expect(ceilDiv(1_000_001, 1_000_000)).toBe(2);
    expect(ceilDiv(1024 * 1024, 1_000_000)).toBe(2);
    expect(() => ceilDiv(5, 0)).toThrow();
    expect(() => ceilDiv(5, -1)).toThrow();
  });

  it('toMicros reads integers from pg strings, numbers and bigints and rejects anything else', () => {
    expect(toMicros('12345')).toBe(12_345);
    expect(toMicros(7)).toBe(7);
    expect(toMicros(9n)).toBe(9);
    expect(toMicros(null)).toBe(0);
    expect(toMicros(undefined)).toBe(0);
    expect(() => toMicros(1.5)).toThrow(/not an integer/);
    expect(() => toMicros('1.5')).toThrow(/not an integer/);
    expect(() => toMicros('abc')).toThrow(/not an integer/);
    expect(() => toMicros(Number.MAX_SAFE_INTEGER + 1)).toThrow(/not an integer/);
    expect(() => toMicros(2n ** 60n)).toThrow(/not an integer/);
  });
});

describe('canonicalJson', () => {
  it('ignores key order at every depth', () => {
    const a = { b: 1, a: { y: [1, { q: 1, p: 2 }], x: 'x' }, c: null };
    const b = { c: null, a: { x: 'x', y: [1, { p: 2, q: 1 }] }, b: 1 };
    expect(canonicalJson(a)).toBe(canonicalJson(b));
    expect(canonicalJson(a)).toBe('{"a":{"x":"x","y":[1,{"p":2,"q":1}]},"b":1,"c":null}');
  });

  it('keeps array order and distinguishes different values', () => {
    expect(canonicalJson([1, 2])).not.toBe(canonicalJson([2, 1]));
    expect(canonicalJson({ a: 1 })).not.toBe(canonicalJson({ a: '1' }));
    expect(canonicalJson({ a: { b: 1 } })).not.toBe(canonicalJson({ a: { b: 2 } }));
  });

  it('drops undefined properties, so an absent and an undefined field compare equal', () => {
    expect(canonicalJson({ a: 1, b: undefined, c: { d: undefined } })).toBe('{"a":1,"c":{}}');
    expect(canonicalJson({ a: 1, b: undefined })).toBe(canonicalJson({ a: 1 }));
  });
});

describe('api keys', () => {
  const SECRET = /^tes_[0-9A-Za-z]{8}_[0-9A-Za-z]{32}$/;

  it('generateKeySecret gives tes_ + 8-char lookup id + _ + 32 base62 characters', () => {
    const secrets = new Set<string>();
    for (let i = 0; i < 200; i++) {
      const k = generateKeySecret();
      expect(k.secret).toMatch(SECRET);
      expect(k.secret.slice(4, 12)).toBe(k.lookupId);
      expect(k.digest.equals(digestSecret(k.secret))).toBe(true);
      secrets.add(k.secret);
    }
    expect(secrets.size).toBe(200);
  });

  it('parseKeySecret returns the lookup id of a well-formed secret and null otherwise', () => {
    const { secret, lookupId } = generateKeySecret();
    expect(parseKeySecret(secret)).toBe(lookupId);
    expect(parseKeySecret(`${secret}x`)).toBeNull();
    expect(parseKeySecret(secret.slice(0, -1))).toBeNull();
    expect(parseKeySecret(secret.replace('tes_', 'sk_'))).toBeNull();
    expect(parseKeySecret(`${secret.slice(0, -1)}-`)).toBeNull();
    expect(parseKeySecret(` ${secret}`)).toBeNull();
    expect(parseKeySecret('')).toBeNull();
  });

  it('the digest is the SHA-256 of the whole secret', () => {
    const { secret } = generateKeySecret();
    const expected = createHash('sha256').update(secret, 'utf8').digest();
    expect(digestSecret(secret).equals(expected)).toBe(true);
    expect(digestSecret(secret)).toHaveLength(32);
  });

  it('digestsEqual is true only for the same bytes', () => {
    const a = digestSecret(generateKeySecret().secret);
    expect(digestsEqual(a, Buffer.from(a))).toBe(true);
    expect(digestsEqual(a, digestSecret(generateKeySecret().secret))).toBe(false);
    const flipped = Buffer.from(a);
    flipped[31] = flipped[31]! ^ 1;
    expect(digestsEqual(a, flipped)).toBe(false);
    // a different length must answer false, not throw (timingSafeEqual would throw)
    expect(digestsEqual(a, a.subarray(0, 31))).toBe(false);
    expect(digestsEqual(a, Buffer.alloc(0))).toBe(false);
  });
});
