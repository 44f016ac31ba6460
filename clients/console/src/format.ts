import type { Execution } from './api';

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

/** Where a queued execution stands in its category's line: the position (1 is next) and the server's estimated start. */
export interface QueuePlace {
  position: number;
  estimatedStartAt: Date | undefined;
}

/**
 * The place in line while `queued`, else undefined (after the start, and from a gateway older
 * than the fair-share order, which sends no queuePosition). A position the contract does not
 * allow (below 1, not whole) or a time that does not parse counts as absent: the same reading
 * as the SDK's queuePlace(), which this page does not bundle (it is the Node client).
 */
export function queuePlace(e: Execution): QueuePlace | undefined {
  if (e.status !== 'queued') return undefined;
  const { queuePosition, estimatedStartAt } = e.progress;
  if (typeof queuePosition !== 'number' || !Number.isInteger(queuePosition) || queuePosition < 1) return undefined;
  const at = typeof estimatedStartAt === 'string' ? new Date(estimatedStartAt) : undefined;
  return { position: queuePosition, estimatedStartAt: at && !Number.isNaN(at.getTime()) ? at : undefined };
}

/** "Position 3 in line", "Next in line": the first half of what the console shows. */
export function placeInLine(place: QueuePlace): string {
  return place.position === 1 ? 'Next in line' : `Position ${place.position} in line`;
}

/**
 * "in about 12 s", "in about 4 min", "any moment" (due or past, and still waiting), counted
 * from this browser's clock: an estimate, so in whole units.
 */
export function startsIn(at: Date, now: number = Date.now()): string {
  const ms = at.getTime() - now;
  if (ms < 500) return 'any moment';
  const seconds = Math.round(ms / 1000);
  if (seconds < 90) return `in about ${seconds} s`;
  const minutes = Math.round(seconds / 60);
  return minutes < 90 ? `in about ${minutes} min` : `in about ${Math.round(minutes / 60)} h`;
}
