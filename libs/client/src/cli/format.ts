import type { Execution } from '../types';

export interface Output {
  write(chunk: string): unknown;
  isTTY?: boolean;
  columns?: number;
}

/** Integer micro-USD as dollars with all six decimals: 1500 -> "$0.001500". No floats. */
export function usd(micros: number | null): string {
  if (micros === null) return 'none';
  const sign = micros < 0 ? '-' : '';
  const abs = Math.abs(micros);
  return `${sign}$${Math.floor(abs / 1_000_000)}.${String(abs % 1_000_000).padStart(6, '0')}`;
}

/** Left-aligned columns separated by two spaces. */
export function table(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]): string => cells.map((c, i) => c.padEnd(widths[i] ?? 0)).join('  ').trimEnd();
  return [line(header), ...rows.map(line)].join('\n') + '\n';
}

/**
 * Progress of an execution on stderr: a redrawn bar on a terminal, otherwise one line per
 * change, so logs of non-interactive runs stay readable. Never writes to stdout.
 */
export class ProgressBar {
  private last = '';
  private drawn = false;

  constructor(private readonly out: Output, private readonly width = 24) {}

  update(e: Execution): void {
    const { completedSteps, totalSteps, currentStep } = e.progress;
    const filled = totalSteps > 0 ? Math.round((completedSteps / totalSteps) * this.width) : 0;
    const bar = `[${'#'.repeat(filled)}${'.'.repeat(this.width - filled)}]`;
    const text = `${bar} ${completedSteps}/${totalSteps} ${e.status}${currentStep ? ` (${currentStep})` : ''}`;
    if (text === this.last) return;
    this.last = text;
    if (this.out.isTTY) {
      this.out.write(`\r\x1b[2K${text}`);
      this.drawn = true;
    } else {
      this.out.write(`${e.id} ${text}\n`);
    }
  }

  done(): void {
    if (this.drawn) this.out.write('\n');
    this.drawn = false;
  }
}
