import { executionCommand } from '../src/cli/commands';
import { describeQueuePlace, queuePlace, type Execution } from '../src';
import { ID, execution, fakeApi, json, queued } from './fake-api';

/**
 * The place in line (progress.queuePosition, progress.estimatedStartAt) as the SDK reads it
 * and the CLI shows it. Both fields are optional: a server older than the fair-share order
 * sends neither, and a newer one drops them once the execution started.
 */
const NOW = Date.parse('2026-11-26T15:00:00Z');

describe('queuePlace', () => {
  it('reads the position and the estimate of a queued execution', () => {
    expect(queuePlace(queued(3, '2026-11-26T15:00:12Z'))).toEqual({ position: 3, estimatedStartAt: new Date('2026-11-26T15:00:12Z') });
    expect(queuePlace(queued(1))).toEqual({ position: 1, estimatedStartAt: undefined });
  });

  it('is undefined from an older server, once started, and for values the contract does not allow', () => {
    expect(queuePlace(execution('queued'))).toBeUndefined(); // an older server: no fields at all
    const e = queued(2, '2026-11-26T15:00:12Z');
    for (const status of ['running', 'waiting', 'succeeded', 'cancelled'] as const) expect(queuePlace({ ...e, status })).toBeUndefined();
    const withPosition = (queuePosition: unknown): Execution => ({ ...e, progress: { ...e.progress, queuePosition: queuePosition as number } });
    for (const bad of [null, 0, -1, 1.5, '3', Number.NaN]) expect(queuePlace(withPosition(bad))).toBeUndefined();
    // a time that does not parse is no estimate; the position still stands
    expect(queuePlace(queued(2, 'soon'))).toEqual({ position: 2, estimatedStartAt: undefined });
  });
});

describe('describeQueuePlace', () => {
  const place = (position: number, inMs?: number) => ({ position, estimatedStartAt: inMs === undefined ? undefined : new Date(NOW + inMs) });

  it('says the position, and the estimate in whole seconds, minutes or hours', () => {
    expect(describeQueuePlace(place(3, 12_400), NOW)).toBe('position 3 in line, est. start in ~12 s');
    expect(describeQueuePlace(place(1), NOW)).toBe('next in line');
    expect(describeQueuePlace(place(40), NOW)).toBe('position 40 in line');
    expect(describeQueuePlace(place(7, 89_000), NOW)).toBe('position 7 in line, est. start in ~89 s');
    expect(describeQueuePlace(place(7, 95_000), NOW)).toBe('position 7 in line, est. start in ~2 min');
    expect(describeQueuePlace(place(900, 3 * 3600_000), NOW)).toBe('position 900 in line, est. start in ~3 h');
  });

  it('an estimate that is due or past reads "any moment": the execution is still waiting', () => {
    expect(describeQueuePlace(place(1, 200), NOW)).toBe('next in line, est. start any moment');
    expect(describeQueuePlace(place(2, -30_000), NOW)).toBe('position 2 in line, est. start any moment');
  });
});

describe('tes execution ID', () => {
  async function show(e: Execution): Promise<string> {
    const { client } = fakeApi(() => json(200, { data: e }));
    let out = '';
    const io = { stdout: { write: (s: string) => (out += s) }, stderr: { write: () => true }, stdin: process.stdin };
    await executionCommand({ client, io, json: false, values: {}, positionals: [ID] });
    return out;
  }

  it('shows the place in line while queued, with the estimate as the server sent it', async () => {
    const start = new Date(Date.now() + 12_300).toISOString();
    const lines = (await show(queued(3, start))).split('\n');
    expect(lines[0]).toBe(`${ID}  test.sleep (sleep)  queued`);
    expect(lines[1]).toBe(`  position 3 in line, est. start in ~12 s (${start})`);
    expect(lines[2]).toMatch(/^ {2}steps 0\/2, reserved/);
  });

  it('shows nothing more from an older server, or once started', async () => {
    expect(await show(execution('queued'))).not.toContain('in line');
    const started = queued(1, new Date(Date.now() + 1_000).toISOString());
    expect(await show({ ...started, status: 'running' })).not.toContain('in line');
  });
});
