import { backoffDelayMs, retry, sleep } from '@tes/core';

describe('sleep', () => {
  it('resolves after the time', async () => {
    const t = Date.now();
    await sleep(30);
    expect(Date.now() - t).toBeGreaterThanOrEqual(25);
  });

  it("rejects with the signal's reason when aborted, before or during", async () => {
    const reason = new Error('stop');
    await expect(sleep(10_000, AbortSignal.abort(reason))).rejects.toBe(reason);
    const c = new AbortController();
    setTimeout(() => c.abort(reason), 10);
    const t = Date.now();
    await expect(sleep(10_000, c.signal)).rejects.toBe(reason);
    expect(Date.now() - t).toBeLessThan(1_000);
  });
});

describe('backoffDelayMs', () => {
  it('doubles from the first delay up to the cap; full jitter draws below that', () => {
    const fixed = { firstMs: 200, maxMs: 5_000, jitter: 'none' } as const;
    expect([0, 1, 2, 3, 4, 5, 10].map((a) => backoffDelayMs(a, fixed))).toEqual([200, 400, 800, 1_600, 3_200, 5_000, 5_000]);
    for (let a = 0; a < 20; a++) {
      const d = backoffDelayMs(a, { ...fixed, jitter: 'full' });
      expect(d).toBeGreaterThanOrEqual(0);
      expect(d).toBeLessThanOrEqual(Math.min(5_000, 200 * 2 ** a));
    }
  });
});

describe('retry', () => {
  const quick = { firstMs: 1, maxMs: 2, jitter: 'none' } as const;

  it('retries while retryable, up to the attempts, and rejects with the last error', async () => {
    let n = 0;
    const fail = async () => {
      throw new Error(`e${++n}`);
    };
    await expect(retry(fail, { ...quick, attempts: 3, retryable: () => true, signal: new AbortController().signal })).rejects.toThrow('e3');
    n = 0;
    await expect(retry(fail, { ...quick, attempts: 3, retryable: () => false, signal: new AbortController().signal })).rejects.toThrow('e1');
  });

  it('returns the first success', async () => {
    let n = 0;
    const flaky = async () => (++n < 3 ? Promise.reject(new Error('no')) : n);
    await expect(retry(flaky, { ...quick, retryable: () => true, signal: new AbortController().signal })).resolves.toBe(3);
  });

  it('starts no attempt past its window, and takes a hinted delay over the backoff', async () => {
    let n = 0;
    const fail = async () => {
      n += 1;
      throw new Error('no');
    };
    const t = Date.now();
    await expect(
      retry(fail, { ...quick, windowMs: 1_000, delayHintMs: () => 600, retryable: () => true, signal: new AbortController().signal }),
    ).rejects.toThrow();
    expect(n).toBe(2); // at 0 ms and 600 ms; a third at 1200 ms would begin past the window
    expect(Date.now() - t).toBeLessThan(1_150); // and it is not waited for
  });
});
