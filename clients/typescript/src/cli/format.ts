import { describeQueuePlace, queuePlace, type QueuePlace } from '../queue';
import { isFinal, type Execution } from '../types';

export interface Output {
  write(chunk: string): unknown;
  isTTY?: boolean;
  columns?: number;
}

export { usd } from '../money';

/**
 * Columns separated by two spaces, left-aligned, or right-aligned where `right` says so
 * (amounts, counts), so figures line up on their last digit. Given the terminal's `columns`,
 * the last column's text wraps between words under itself, so the terminal never breaks a
 * row mid-word (`tes tools` at 80 columns: its prices are the long column).
 */
export function table(header: readonly string[], rows: readonly (readonly string[])[], right: readonly number[] = [], columns?: number): string {
  const last = header.length - 1;
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const indent = widths.slice(0, last).reduce((sum, w) => sum + w + 2, 0);
  const room = columns === undefined ? Infinity : Math.max(20, columns - indent - 1);
  const line = (cells: readonly string[]): string =>
    cells
      .map((c, i) => (right.includes(i) ? c.padStart(widths[i] ?? 0) : c.padEnd(widths[i] ?? 0)))
      .join('  ')
      .trimEnd();
  const lines = (cells: readonly string[]): string[] => {
    const text = cells[last] ?? '';
    if (text.length <= room) return [line(cells)];
    const [first = '', ...more] = wrap(text, room);
    return [line([...cells.slice(0, last), first]), ...more.map((m) => `${' '.repeat(indent)}${m}`)];
  };
  return [line(header), ...rows.flatMap(lines)].join('\n') + '\n';
}

/** Words wrapped to `width` columns (at least 20); a word longer than a line gets a line of its own. */
export function wrap(text: string, width: number): string[] {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(/\s+/).filter(Boolean)) {
    if (line && line.length + 1 + word.length > Math.max(20, width)) {
      lines.push(line);
      line = word;
    } else line = line ? `${line} ${word}` : word;
  }
  if (line) lines.push(line);
  return lines;
}

const SPINNER = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
const BAR_WIDTH = 20;

/** Elapsed time as "4.2s" under a minute, "3m05s" above. */
export function elapsed(ms: number): string {
  const s = Math.max(0, ms) / 1000;
  if (s < 60) return `${s.toFixed(1)}s`;
  return `${Math.floor(s / 60)}m${String(Math.floor(s % 60)).padStart(2, '0')}s`;
}

function bar(e: Execution, width: number): string {
  const { completedSteps, totalSteps } = e.progress;
  const filled = totalSteps > 0 ? Math.round((Math.min(completedSteps, totalSteps) / totalSteps) * width) : 0;
  return `${'█'.repeat(filled)}${'░'.repeat(width - filled)}`;
}

/**
 * The words of one update: status (and a pending cancel), steps done, and what is happening
 * now: the running step, or while queued the place in line (when the server reports one).
 */
function describeProgress(e: Execution, now: number): { status: string; steps: string; detail: string; place: QueuePlace | undefined } {
  const { completedSteps, totalSteps, currentStep } = e.progress;
  const status = e.cancelRequested && e.status !== 'cancelled' ? `${e.status}, cancel requested` : e.status;
  const place = queuePlace(e);
  return { status, steps: `${completedSteps}/${totalSteps} steps`, detail: place ? describeQueuePlace(place, now) : (currentStep ?? ''), place };
}

/**
 * Progress of an execution on stderr, never stdout. On a terminal: one line redrawn in place
 * (spinner, status, a bar of completed steps, the running step, the time since start), cut to
 * the terminal's width, because a line that wraps cannot be redrawn with \r. Otherwise one
 * plain line per change, so logs of non-interactive runs stay readable and greppable. While
 * queued, the place in line stands where the running step will (no bar yet: it would be empty).
 */
export class ProgressView {
  private latest: Execution | undefined;
  /** What the server said in the last plain line (not the words that count down), so a line is written per change. */
  private lastSaid = '';
  private frame = 0;
  private ticker: ReturnType<typeof setInterval> | undefined;
  private readonly startedAt: number;

  constructor(
    private readonly out: Output,
    private readonly now: () => number = Date.now,
  ) {
    this.startedAt = now();
  }

  update(e: Execution): void {
    this.latest = e;
    if (!this.out.isTTY) {
      const now = this.now();
      const d = describeProgress(e, now);
      // The estimate's words count down with the clock; a change is a change of what the server said.
      const said = JSON.stringify([d.status, d.steps, e.progress.currentStep, d.place?.position, d.place?.estimatedStartAt?.getTime()]);
      if (said !== this.lastSaid)
        this.out.write(`${e.id}  ${d.status.padEnd(9)}  ${d.steps}${d.detail ? `  ${d.detail}` : ''}  +${elapsed(now - this.startedAt)}\n`);
      this.lastSaid = said;
      return;
    }
    // The spinner and the clock move between updates too: a long step still looks alive.
    this.ticker ??= setInterval(() => this.draw(), 100).unref();
    this.draw();
  }

  /** The final state stays on the screen; the cursor goes to the next line. */
  done(): void {
    if (this.ticker === undefined) return;
    clearInterval(this.ticker);
    this.ticker = undefined;
    this.draw(true);
    this.out.write('\n');
  }

  private draw(final = false): void {
    const e = this.latest;
    if (!e) return;
    const d = describeProgress(e, this.now());
    // done() before a final status: the caller stopped waiting (Ctrl-C), which is no failure.
    const mark = !final ? (SPINNER[this.frame++ % SPINNER.length] ?? '') : e.status === 'succeeded' ? '✔' : isFinal(e.status) ? '✘' : '·';
    // No id here: it takes a third of the line, and the summary printed next names it.
    const head = `${mark} ${d.status.padEnd(9)}`;
    const time = elapsed(this.now() - this.startedAt).padEnd(5);
    // A narrow terminal shrinks the bar, then drops it; the step's name, last, is what gets
    // cut. The bar's width ignores that name, so it does not jump when a step starts or ends.
    // While queued there is no bar: it would be empty, and its room lets the place in line
    // ("position 3 in line, est. start in ~12 s") fit on an 80-column terminal uncut.
    // Every character here is one UTF-16 unit and one column wide (step names are ASCII), so
    // lengths are widths.
    const width = Math.max(20, (this.out.columns ?? 80) - 1);
    const barWidth = d.place ? 0 : Math.min(BAR_WIDTH, width - head.length - d.steps.length - time.length - 6);
    const text = `${head}  ${barWidth >= 6 ? `${bar(e, barWidth)}  ` : ''}${d.steps}  ${time}${d.detail ? `  ${d.detail}` : ''}`.trimEnd();
    this.out.write(`\r\x1b[2K${text.slice(0, width)}`);
  }
}
