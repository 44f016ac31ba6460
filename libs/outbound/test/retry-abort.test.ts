import { withRetries } from '@tes/outbound';

// A stop (or a step's deadline) aborts the signal: a retry loop must end at once, not sit out its backoff.
it('withRetries ends when its signal aborts during a backoff', async () => {
  const controller = new AbortController();
  let calls = 0;
  const failing = async () => {
    calls += 1;
    if (calls === 2) setTimeout(() => controller.abort(new Error('stopping')), 20);
    throw new Error('flaky');
  };
  const started = Date.now();
  // eight attempts: backoffs up to 200·2^k ms (capped at 5 s) would take seconds
  jest.spyOn(Math, 'random').mockReturnValue(0.999);
  await expect(withRetries(failing, () => true, controller.signal, 8)).rejects.toThrow(/stopping|flaky/);
  expect(Date.now() - started).toBeLessThan(600);
  expect(calls).toBeLessThanOrEqual(3);
});
