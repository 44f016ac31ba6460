/** Money is an integer count of micro-USD. 1 USD = 1,000,000 micros. Never a float. */
const MICROS_PER_USD = 1_000_000;

/** Human text for a price description, e.g. 2000 -> "$0.002". Display only. */
export function formatUsd(micros: number): string {
  const whole = Math.floor(micros / MICROS_PER_USD);
  const frac = String(micros % MICROS_PER_USD)
    .padStart(6, '0')
    .replace(/0+$/, '');
  return `$${whole}${frac ? `.${frac.length < 2 ? frac.padEnd(2, '0') : frac}` : ''}`;
}

/** Ceiling division on non-negative integers, for "per started unit" pricing. */
export function ceilDiv(a: number, b: number): number {
  if (b <= 0) throw new Error('ceilDiv by non-positive');
  return Math.floor((a + b - 1) / b);
}

/** Postgres bigint arrives as a string from node-pg; micros stay far below 2^53. */
export function toMicros(value: string | number | bigint | null | undefined): number {
  if (value === null || value === undefined) return 0;
  const n = typeof value === 'number' ? value : Number(value);
  if (!Number.isSafeInteger(n)) throw new Error(`not an integer amount of micros: ${String(value)}`);
  return n;
}
