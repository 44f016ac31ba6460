import { ProgressView, elapsed } from '../src/cli/format';
import { execution, queued } from './fake-api';

/** `tes run`'s progress on stderr: a redrawn line on a terminal, plain lines otherwise. */
function output(isTTY: boolean, columns?: number) {
  const writes: string[] = [];
  return { out: { isTTY, ...(columns ? { columns } : {}), write: (s: string) => writes.push(s) }, writes };
}

/** What a terminal shows after the writes: the text after the last clear-line. */
const screenLine = (writes: string[]): string => writes.join('').split('\r\x1b[2K').at(-1)!.replace(/\n$/, '');

describe('ProgressView', () => {
  it('on a terminal: one line redrawn in place, within the width; a final mark and a newline at the end', () => {
    let now = 1_000;
    const { out, writes } = output(true, 100);
    const view = new ProgressView(out, () => now);
    view.update(execution('running', 1, 3));
    now += 2_345;
    view.update(execution('running', 2, 3));
    const line = screenLine(writes);
    expect(line).toMatch(/^. running {4}█{13}░{7} {2}2\/3 steps {2}2\.3s {3}sleep_2$/); // the time is padded: the name does not jump at 10 s
    expect(writes.every((w) => w.startsWith('\r\x1b[2K'))).toBe(true);
    view.update(execution('succeeded', 3, 3));
    view.done();
    expect(screenLine(writes)).toMatch(/^✔ succeeded {2}█{20} {2}3\/3 steps {2}2\.3s$/);
    expect(writes.at(-1)).toBe('\n');
  });

  it('a narrow terminal shrinks the bar, then drops it, then cuts the step name; never wraps', () => {
    for (const columns of [30, 45, 60]) {
      const { out, writes } = output(true, columns);
      const view = new ProgressView(out, () => 0);
      view.update(execution('running', 1, 2));
      view.done();
      const line = screenLine(writes);
      expect(line.length).toBeLessThan(columns); // every character drawn is one column
      expect(line).toContain('1/2 steps');
      expect(line).toContain('0.0s');
    }
  });

  it('Ctrl-C before the end is not drawn as a failure', () => {
    const { out, writes } = output(true, 80);
    const view = new ProgressView(out, () => 0);
    view.update(execution('running', 1, 2));
    view.done();
    expect(screenLine(writes)).toMatch(/^· running/);
  });

  it('not a terminal: one plain line per change, with the id, no escape codes', () => {
    let now = 0;
    const { out, writes } = output(false);
    const view = new ProgressView(out, () => now);
    view.update(execution('queued'));
    now += 500;
    view.update(execution('queued')); // unchanged: no line
    view.update(execution('running', 0));
    now += 700;
    view.update(execution('succeeded', 2));
    view.done();
    expect(writes.join('')).toBe(
      'exe_01JD3Z8X4V6W2Q9R7T5Y1M3N8K  queued     0/2 steps  +0.0s\n' +
        'exe_01JD3Z8X4V6W2Q9R7T5Y1M3N8K  running    0/2 steps  sleep_0  +0.5s\n' +
        'exe_01JD3Z8X4V6W2Q9R7T5Y1M3N8K  succeeded  2/2 steps  +1.2s\n',
    );
  });

  it('elapsed: tenths under a minute, minutes and seconds above', () => {
    expect([elapsed(0), elapsed(4_249), elapsed(59_940), elapsed(185_000)]).toEqual(['0.0s', '4.2s', '59.9s', '3m05s']);
  });
});

describe('ProgressView while queued', () => {
  const at = (ms: number) => new Date(ms).toISOString();

  it('on a terminal: the place in line where the step will be, counting down between updates, uncut at 80 columns; nothing of it once running', () => {
    jest.useFakeTimers();
    let now = Date.parse('2026-11-26T15:00:00Z');
    const { out, writes } = output(true, 80);
    const view = new ProgressView(out, () => now);
    view.update(queued(3, at(now + 12_000)));
    expect(screenLine(writes)).toMatch(/^. queued {5}0\/2 steps {2}0\.0s {3}position 3 in line, est\. start in ~12 s$/);
    expect(screenLine(writes).length).toBeLessThan(80);
    now += 5_000; // no update from the server: the ticker's redraw counts the estimate down
    jest.advanceTimersByTime(100);
    expect(screenLine(writes)).toMatch(/ {2}5\.0s {3}position 3 in line, est\. start in ~7 s$/);
    view.update(queued(1, at(now - 1_000)));
    expect(screenLine(writes)).toMatch(/next in line, est\. start any moment$/);
    view.update(queued(2));
    expect(screenLine(writes)).toMatch(/ {3}position 2 in line$/);
    // A server that still sent the fields after the start: only the queued status shows them.
    view.update({ ...execution('running', 0), progress: { ...execution('running', 0).progress, queuePosition: 1 } });
    expect(screenLine(writes)).toMatch(/^. running {4}░{20} {2}0\/2 steps {2}5\.0s {3}sleep_0$/);
    view.done();
    jest.useRealTimers();
  });

  it('not a terminal: a line per change of what the server said, not per tick of the estimate', () => {
    let now = Date.parse('2026-11-26T15:00:00Z');
    const { out, writes } = output(false);
    const view = new ProgressView(out, () => now);
    const start = at(now + 40_000);
    view.update(queued(3, start));
    now += 2_000;
    view.update(queued(3, start)); // a poll that says the same: no line, though "~40 s" became "~38 s"
    view.update(queued(2, start));
    now += 2_000;
    view.update(execution('running', 0));
    view.done();
    expect(writes.join('')).toBe(
      'exe_01JD3Z8X4V6W2Q9R7T5Y1M3N8K  queued     0/2 steps  position 3 in line, est. start in ~40 s  +0.0s\n' +
        'exe_01JD3Z8X4V6W2Q9R7T5Y1M3N8K  queued     0/2 steps  position 2 in line, est. start in ~38 s  +2.0s\n' +
        'exe_01JD3Z8X4V6W2Q9R7T5Y1M3N8K  running    0/2 steps  sleep_0  +4.0s\n',
    );
  });
});
