/**
 * Integer micro-USD as dollars, exact, without trailing zeros but with at least cents:
 * 1500 -> "$0.0015", 2000 -> "$0.002", 600000 -> "$0.60", 1000000 -> "$1.00". No floats.
 */
export function usd(micros: number | null): string {
  if (micros === null) return 'none';
  const sign = micros < 0 ? '-' : '';
  const abs = Math.abs(micros);
  const fraction = String(abs % 1_000_000)
    .padStart(6, '0')
    .replace(/0+$/, '')
    .padEnd(2, '0');
  return `${sign}$${Math.floor(abs / 1_000_000)}.${fraction}`;
}

/** A byte count as people read a limit: "12 MiB (12,582,912 bytes)", "64 KiB (65,536 bytes)". */
export function byteSize(bytes: number): string {
  const exact = `${bytes.toLocaleString('en-US')} bytes`;
  for (const [unit, size] of [
    ['MiB', 1024 * 1024],
    ['KiB', 1024],
  ] as const) {
    if (bytes >= size) return `${bytes % size === 0 ? bytes / size : (bytes / size).toFixed(1)} ${unit} (${exact})`;
  }
  return exact;
}
