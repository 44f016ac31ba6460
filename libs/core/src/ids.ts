import { monotonicFactory } from 'ulid';

/** Prefixes of every public identifier (api-contract.md, "ID form"). */
export type IdPrefix = 'org' | 'prj' | 'key' | 'file' | 'exe' | 'art';

const nextUlid = monotonicFactory();
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
