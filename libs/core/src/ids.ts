import { randomFillSync } from 'node:crypto';
import { monotonicFactory } from 'ulid';

/**
 * Prefixes of every public identifier (docs/api.md#identifiers), and `txn` for a journal
 * transaction: time-ordered like the rest, so its index takes each new entry at its right edge
 * (a random UUID lands on a random leaf of an index that grows by four entries per execution:
 * at 10 M executions of history that leaf is rarely cached, and its first change after each
 * checkpoint writes the whole 8 KB page to the WAL).
 */
export type IdPrefix = 'org' | 'prj' | 'key' | 'file' | 'exe' | 'art' | 'whk' | 'txn' | 'msg';

/**
 * ulid's own source asks the OS-backed CSPRNG for one byte at a time (16 calls per id); this
 * draws the same bytes from a 4 KiB block refilled by one call (≈3 % of the gateway's CPU per
 * submit before). Same generator, same distribution (byte / 256).
 */
const pool = Buffer.alloc(4096);
let next = pool.length;
function pooledRandom(): number {
  if (next >= pool.length) {
    randomFillSync(pool);
    next = 0;
  }
  return pool[next++]! / 256;
}

const nextUlid = monotonicFactory(pooledRandom);
const ULID_PATTERN = '[0-9A-HJKMNP-TV-Z]{26}';
const patterns = new Map<IdPrefix, RegExp>();

/** A prefixed, time-sortable ULID such as `exe_01JD3…`. Monotonic within a process. */
export function newId(prefix: IdPrefix): string {
  return `${prefix}_${nextUlid()}`;
}

/** True when `value` has the exact shape of an id with this prefix. */
export function isId(prefix: IdPrefix, value: unknown): value is string {
  if (typeof value !== 'string') return false;
  let re = patterns.get(prefix);
  if (!re) {
    re = new RegExp(`^${prefix}_${ULID_PATTERN}$`);
    patterns.set(prefix, re);
  }
  return re.test(value);
}
