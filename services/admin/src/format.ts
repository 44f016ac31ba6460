/**
 * Human-readable output: aligned columns (whitespace-separated, so `grep` and `awk` work on
 * them; a box-drawing table library would get in their way) and exact money.
 */

const MICROS_PER_USD = 1_000_000n;

/** Exact dollars of an amount of micros, all six decimals kept: -2500000 -> "-2.500000". */
export function usd(micros: number): string {
  const n = BigInt(micros);
  const abs = n < 0n ? -n : n;
  return `${n < 0n ? '-' : ''}${abs / MICROS_PER_USD}.${String(abs % MICROS_PER_USD).padStart(6, '0')}`;
}

/** "2500000 ($2.500000)": how a table shows an amount. */
export function money(micros: number | null | undefined): string {
  if (micros === null || micros === undefined) return '-';
  const d = usd(micros);
  return `${micros} (${d.startsWith('-') ? `-$${d.slice(1)}` : `$${d}`})`;
}

/** A cell: null and undefined show as "-", so every row has every column for awk. */
function cell(v: unknown): string {
  if (v === null || v === undefined || v === '') return '-';
  if (typeof v === 'string') return v.replace(/\s+/g, ' ');
  if (typeof v === 'number' || typeof v === 'boolean' || typeof v === 'bigint') return String(v);
  return JSON.stringify(v);
}

export interface Column<T> {
  header: string;
  value: (row: T) => unknown;
  /** Numbers and amounts read best right-aligned. */
  right?: boolean;
}

export function table<T>(rows: readonly T[], columns: readonly Column<T>[]): string {
  const cells = rows.map((r) => columns.map((c) => cell(c.value(r))));
  const widths = columns.map((c, i) => Math.max(c.header.length, ...cells.map((r) => r[i]!.length)));
  const line = (values: string[]) =>
    values
      .map((v, i) => (columns[i]!.right ? v.padStart(widths[i]!) : v.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd();
  return [line(columns.map((c) => c.header.toUpperCase())), ...cells.map(line)].join('\n');
}

/** "field  value" lines for one record. */
export function fields(pairs: readonly [string, unknown][]): string {
  const width = Math.max(...pairs.map(([k]) => k.length));
  return pairs.map(([k, v]) => `${k.padEnd(width)}  ${cell(v)}`).join('\n');
}

/** A titled part of a `show` output; an empty list says so instead of printing a bare header. */
export function section(title: string, body: string | null): string {
  return `\n${title}\n${body ?? '  (none)'}`;
}
