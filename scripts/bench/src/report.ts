/**
 * The output: a table (figure, value, baseline, ratio, target, met?), where the CPU went
 * during each run, notes (errors, purges), then ONE final line of JSON with named figures.
 * Nothing may be printed after that line: readers take the last line of the output.
 */
export interface Row {
  figure: string;
  value: number | undefined;
  unit: string;
  baseline?: string;
  baselineValue?: number;
  /** value / baselineValue unless given; null for none (the baseline is context, not a peer). */
  ratio?: number | null;
  target?: string;
  met?: boolean;
}

const fmt = (v: number | undefined, unit = ''): string => {
  if (v === undefined || !Number.isFinite(v)) return '—';
  const digits = Math.abs(v) >= 100 ? 0 : Math.abs(v) >= 10 ? 1 : 2;
  return `${v.toFixed(digits)}${unit ? ` ${unit}` : ''}`;
};

/** CPU % (of one core) used by processes outside the benchmark above which a run is called noisy. */
const NOISY_OTHER_CPU = 25;

export class Report {
  readonly rows: Row[] = [];
  readonly figures: Record<string, number | boolean | string | null> = {};
  readonly cpu: { run: string; byProcess: Record<string, number> }[] = [];
  readonly notes: string[] = [];

  add(row: Row): Row {
    if (row.ratio === undefined && row.value !== undefined && row.baselineValue) row.ratio = row.value / row.baselineValue;
    this.rows.push(row);
    return row;
  }

  /** A named figure for the JSON line (rounded: 2 decimals, or whole numbers past 100). */
  figure(name: string, v: number | boolean | string | undefined | null): void {
    if (typeof v === 'number') v = Number.isFinite(v) ? (Math.abs(v) >= 100 ? Math.round(v) : Math.round(v * 100) / 100) : null;
    this.figures[name] = v ?? null;
  }

  cpuOf(run: string, byProcess: Record<string, number> | undefined): void {
    if (byProcess) this.cpu.push({ run, byProcess });
  }

  note(text: string): void {
    this.notes.push(text);
  }

  print(header: string[]): void {
    // other engineers' work on a shared machine: name the runs it visibly disturbed
    const noisy = this.cpu.filter((c) => (c.byProcess.other ?? 0) > NOISY_OTHER_CPU);
    if (noisy.length) {
      this.note(
        `NOISY: in ${noisy.length} of ${this.cpu.length} runs other processes used > ${NOISY_OTHER_CPU}% CPU ` +
          `(${noisy.map((c) => `${c.run} ${c.byProcess.other}%`).join(', ')}); absolute figures are depressed there, ratios less so`,
      );
    }
    this.figures.noisyRuns = noisy.length;
    const out: string[] = ['', ...header, ''];
    const table = [
      ['figure', 'value', 'baseline', 'ratio', 'target', 'met?'],
      ...this.rows.map((r) => [
        r.figure,
        fmt(r.value, r.unit),
        r.baseline ? `${r.baseline} ${fmt(r.baselineValue, r.unit)}` : '—',
        r.ratio == null ? '—' : `${r.ratio.toFixed(2)}×`,
        r.target ?? '—',
        r.met === undefined ? '' : r.met ? 'yes' : 'NO',
      ]),
    ];
    out.push(...grid(table));
    if (this.cpu.length) {
      out.push('', 'CPU by process during each measured run (100 % = one core; "other" = everything else on the machine):');
      for (const c of this.cpu) {
        const parts = Object.entries(c.byProcess)
          .filter(([, v]) => v > 0)
          .sort((a, b) => b[1] - a[1])
          .map(([k, v]) => `${k} ${v}%`);
        out.push(`  ${c.run.padEnd(22)} ${parts.join(', ')}`);
      }
    }
    if (this.notes.length) out.push('', 'Notes:', ...this.notes.map((n) => `  - ${n}`));
    const judged = this.rows.filter((r) => r.met !== undefined);
    const missed = judged.filter((r) => !r.met).map((r) => r.figure);
    out.push('', `targets met: ${judged.length - missed.length}/${judged.length}${missed.length ? ` (missed: ${missed.join('; ')})` : ''}`);
    this.figures.targetsMet = judged.length - missed.length;
    this.figures.targetsJudged = judged.length;
    process.stdout.write(`${out.join('\n')}\n`);
    process.stdout.write(`${JSON.stringify(this.figures)}\n`);
  }
}

function grid(rows: string[][]): string[] {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length)));
  const line = (r: string[]) => `| ${r.map((c, i) => c.padEnd(widths[i]!)).join(' | ')} |`;
  return [line(rows[0]!), `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`, ...rows.slice(1).map(line)];
}
