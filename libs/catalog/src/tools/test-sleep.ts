import { defineTool } from '../types';

/** The longest sleep one step may ask for. */
export const TEST_SLEEP_MAX_SECONDS = 600;

/** test.sleep's arguments as its schema admits them, defaults applied. */
export interface TestSleepArgs {
  model: string;
  seconds: number;
  steps: number;
  costMicrosPerStep: number;
  failAtStep?: number;
}

/**
 * test.sleep (ENABLE_TEST_TOOLS=1 only): each step sleeps, then costs costMicrosPerStep (one
 * unit per step, priced from the arguments, not from the price list).
 * Tests and benchmarks use it to hold executions in `running`, cancel them mid-way and
 * measure the pipeline without media work.
 */
export const testSleep = defineTool<TestSleepArgs>()({
  name: 'test.sleep',
  category: 'test',
  description: 'Test tool: sleeps per step, charges a fixed cost per step, produces a small text artifact.',
  unit: 'step',
  steps: ['sleep'],
  inputSchema: {
    type: 'object',
    additionalProperties: false,
    required: ['seconds', 'steps', 'costMicrosPerStep'],
    properties: {
      model: { type: 'string', enum: ['sleep'], default: 'sleep' },
      seconds: { type: 'number', minimum: 0, maximum: TEST_SLEEP_MAX_SECONDS, description: 'Sleep per step.' },
      steps: { type: 'integer', minimum: 1, maximum: 20 },
      costMicrosPerStep: { type: 'integer', minimum: 0, maximum: 1_000_000 },
      failAtStep: { type: 'integer', minimum: 0, maximum: 19, description: 'Zero-based step that fails.' },
    },
  },
  example: { seconds: 1, steps: 2, costMicrosPerStep: 1000 },
  models: [{ id: 'sleep', description: 'Sleeps; no media work.', example: { seconds: 0, steps: 1, costMicrosPerStep: 0 }, available: true }],
  describePrice: () => 'costMicrosPerStep per step (set in the arguments)',
  estimateUnits: (args) => ({ units: args.steps }),
  cost: (units, _price, args) => units * args.costMicrosPerStep,
  plan: (args) => Array.from({ length: args.steps }, (_, i) => ({ name: 'sleep', label: `sleep_${i}`, billed: true, timeoutMs: args.seconds * 1000 + 30_000 })),
});
