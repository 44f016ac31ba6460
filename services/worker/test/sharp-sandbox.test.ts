import { StepError } from '@tes/core';
import { SharpSandbox } from '../src/media/sharp-sandbox';

/**
 * sharp in a killable child (issue #11, the heavy SVG): librsvg/libvips work cannot be aborted
 * in-process, so a schema-valid SVG that costs minutes of CPU used to run past its step's
 * deadline and hold a tool category. In the sandbox the deadline kills it at once, a CPU limit
 * ends it even without one, and the next render works.
 */
const HEAVY_SVG = `<svg xmlns="http://www.w3.org/2000/svg" width="4096" height="4096">
  <filter id="f"><feTurbulence baseFrequency="0.01" numOctaves="10"/><feGaussianBlur stdDeviation="40"/><feMorphology operator="dilate" radius="20"/></filter>
  <rect width="4096" height="4096" filter="url(#f)"/></svg>`;
const SMALL_SVG = '<svg xmlns="http://www.w3.org/2000/svg" width="64" height="32"><rect width="64" height="32" fill="#08f"/></svg>';
const OPTIONS = { limitInputPixels: 4096 * 4096 * 4, failOn: 'error' as const };
const TO_PNG: [string, unknown[]][] = [['png', []]];

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

it('renders, and keeps a warm child for the next job', async () => {
  const sandbox = new SharpSandbox();
  try {
    const first = await sandbox.run(Buffer.from(SMALL_SVG), OPTIONS, TO_PNG, new AbortController().signal);
    expect(first.info).toMatchObject({ format: 'png', width: 64, height: 32 });
    expect(first.data.subarray(1, 4).toString()).toBe('PNG');
    const before = sandbox.pids;
    expect(before).toHaveLength(1);
    await sandbox.run(Buffer.from(SMALL_SVG), OPTIONS, [['jpeg', [{ quality: 80 }]]], new AbortController().signal);
    expect(sandbox.pids).toEqual(before);
  } finally {
    await sandbox.stop();
  }
});

it("a heavy SVG is killed at the step's deadline, and the next render works", async () => {
  const sandbox = new SharpSandbox();
  try {
    const deadline = new AbortController();
    const timer = setTimeout(() => deadline.abort(new StepError('step_timeout', 'render exceeded 1000 ms')), 1_000);
    const started = Date.now();
    const running = sandbox.run(Buffer.from(HEAVY_SVG), OPTIONS, TO_PNG, deadline.signal);
    await new Promise((r) => setTimeout(r, 500));
    const pids = sandbox.pids;
    expect(pids.length).toBeGreaterThan(0);
    await expect(running).rejects.toMatchObject({ errorCode: 'step_timeout' });
    clearTimeout(timer);
    expect(Date.now() - started).toBeLessThan(2_500);
    await new Promise((r) => setTimeout(r, 200));
    for (const pid of pids) expect(alive(pid)).toBe(false); // no render left burning a core
    const next = await sandbox.run(Buffer.from(SMALL_SVG), OPTIONS, TO_PNG, new AbortController().signal);
    expect(next.info.width).toBe(64);
  } finally {
    await sandbox.stop();
  }
});

it('without a deadline, the CPU limit ends a render that will not stop, as resource_limit_exceeded', async () => {
  const sandbox = new SharpSandbox({ cpuSeconds: 2, addressSpaceBytes: 2 * 1024 ** 3, maxIdle: 1 });
  try {
    const started = Date.now();
    await expect(sandbox.run(Buffer.from(HEAVY_SVG), OPTIONS, TO_PNG, new AbortController().signal)).rejects.toMatchObject({
      errorCode: 'resource_limit_exceeded',
    });
    expect(Date.now() - started).toBeLessThan(10_000);
  } finally {
    await sandbox.stop();
  }
});

it('methods outside the allowed pipeline are refused in the child', async () => {
  const sandbox = new SharpSandbox();
  try {
    await expect(sandbox.run(Buffer.from(SMALL_SVG), OPTIONS, [['toFile', ['/tmp/x.png']]], new AbortController().signal)).rejects.toThrow(/not allowed/);
  } finally {
    await sandbox.stop();
  }
});
