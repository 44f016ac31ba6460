import type { ProviderAvailability, ToolDefinition } from '../types';
import { audioSpeech } from './audio-speech';
import { audioTranscode } from './audio-transcode';
import { imageGenerate } from './image-generate';
import { imageRender } from './image-render';
import { imageTransform } from './image-transform';
import { testSleep } from './test-sleep';
import { videoGenerate } from './video-generate';
import { videoSlideshow } from './video-slideshow';
import { videoThumbnail } from './video-thumbnail';
import { videoTranscode } from './video-transcode';

/**
 * Every built-in tool, keyed by its name (a catalog test checks key and name agree), in the
 * order `GET /tools` lists them. The worker's runner registry is a mapped type over these
 * keys, so a tool without a runner, or a step without its function, does not compile.
 * test.sleep is here for the types; the catalog offers it only with ENABLE_TEST_TOOLS.
 */
export function builtinTools(p: ProviderAvailability) {
  return {
    'image.render': imageRender,
    'image.generate': imageGenerate(p),
    'image.transform': imageTransform,
    'audio.speech': audioSpeech(p),
    'audio.transcode': audioTranscode,
    'video.slideshow': videoSlideshow,
    'video.thumbnail': videoThumbnail,
    'video.transcode': videoTranscode,
    'video.generate': videoGenerate(p),
    'test.sleep': testSleep,
  };
}

type BuiltinTools = ReturnType<typeof builtinTools>;

/** The name of a built-in tool. */
export type ToolName = keyof BuiltinTools;
/** The validated arguments (schema defaults applied) of built-in tool `T`. */
export type ToolArgs<T extends ToolName> = BuiltinTools[T] extends ToolDefinition<infer Args> ? Args : never;
/** The step names of built-in tool `T`. */
export type ToolStep<T extends ToolName> = BuiltinTools[T]['steps'][number];
