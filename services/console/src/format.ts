const USD = new Intl.NumberFormat('en-US', { style: 'currency', currency: 'USD', minimumFractionDigits: 2, maximumFractionDigits: 6 });

/** Integer micro-USD as dollars: 1000 → "$0.001", 150000 → "$0.15", 100000000 → "$100.00". */
export function usd(micros: number): string {
  return USD.format(micros / 1_000_000);
}

const WHEN = new Intl.DateTimeFormat('en-GB', { dateStyle: 'medium', timeStyle: 'medium' });

export function when(iso: string | null | undefined): string {
  return iso ? WHEN.format(new Date(iso)) : '—';
}

/** Seconds between two instants, "1.2 s"; an unfinished one counts to now. */
export function duration(start: string | null | undefined, end: string | null | undefined): string {
  if (!start) return '—';
  const ms = (end ? Date.parse(end) : Date.now()) - Date.parse(start);
  return ms < 1000 ? `${Math.max(0, ms)} ms` : `${(ms / 1000).toFixed(1)} s`;
}

export function bytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1024 / 1024).toFixed(1)} MiB`;
}

const ACRONYMS: Record<string, string> = { svg: 'SVG', fps: 'FPS', id: 'ID' };

/** "costMicrosPerStep" → "Cost micros per step", "fileId" → "File ID". */
export function humanize(name: string): string {
  const words = name
    .replace(/([a-z0-9])([A-Z])/g, '$1 $2')
    .toLowerCase()
    .split(' ')
    .map((w) => ACRONYMS[w] ?? w)
    .join(' ');
  return words.charAt(0).toUpperCase() + words.slice(1);
}
