import { sleep, StepError } from '@tes/core';
import { crashPoint } from '@tes/lifecycle';
import type { RunnerOf } from '../runner';

/** test.sleep: each step sleeps, then reports its one unit; the last step writes a small text file. */
export const testSleepRunner: RunnerOf<'test.sleep'> = {
  async sleep(ctx, args) {
    crashPoint('worker.during_step');
    await sleep(args.seconds * 1000, ctx.signal);
    if (args.failAtStep === ctx.index) throw new StepError('provider_error', `test.sleep failed at step ${ctx.index} as asked`);
    const last = ctx.index === args.steps - 1;
    return {
      units: 1,
      files: last ? [{ format: 'txt', mimeType: 'text/plain', body: Buffer.from(`test.sleep completed ${args.steps} steps\n`) }] : [],
      facts: last ? { steps: args.steps } : {},
    };
  },
};
