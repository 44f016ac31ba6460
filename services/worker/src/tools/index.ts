import type { ToolRunner } from '../runner';
import { imageRenderRunner } from './image-render';
import { testSleepRunner } from './test-sleep';

/** Worker implementations by catalog tool name. */
export const RUNNERS: Readonly<Record<string, ToolRunner>> = {
  'image.render': imageRenderRunner,
  'test.sleep': testSleepRunner,
};
