import { StepError } from '@tes/core';
import { crashPoint } from '@tes/lifecycle';
import { abortableSleep, type ToolRunner } from '../runner';

/** test.sleep: sleep, then cost costMicrosPerStep; the last step writes a small text file. */
export const testSleepRunner: ToolRunner = {
  async runStep(ctx) {
    const args = ctx.args as { seconds: number; steps: number; costMicrosPerStep: number; failAtStep?: number };
    crashPoint('worker.during_step');
    await abortableSleep(args.seconds * 1000, ctx.signal);
    if (args.failAtStep === ctx.index) throw new StepError('provider_error', `test.sleep failed at step ${ctx.index} as asked`);
    const last = ctx.index === args.steps - 1;
    return {
      costMicros: args.costMicrosPerStep,
      files: last ? [{ format: 'txt', mimeType: 'text/plain', body: Buffer.from(`test.sleep completed ${args.steps} steps\n`) }] : [],
      facts: last ? { steps: args.steps } : {},
    };
  },
};
