import type { ToolRunner } from '../runner';
import { imageRenderRunner } from './image-render';
import { testSleepRunner } from './test-sleep';
import { imageGenerateRunner } from './image-generate';
import { videoGenerateRunner } from './video-generate';
import { imageTransformRunner } from './image-transform';
import { audioSpeechRunner } from './audio-speech';
import { audioTranscodeRunner } from './audio-transcode';
import { videoSlideshowRunner } from './video-slideshow';
import { videoThumbnailRunner } from './video-thumbnail';
import { videoTranscodeRunner } from './video-transcode';

/** Worker implementations by catalog tool name. */
export const RUNNERS: Readonly<Record<string, ToolRunner>> = {
  'image.render': imageRenderRunner,
  'test.sleep': testSleepRunner,
  'image.generate': imageGenerateRunner,
  'video.generate': videoGenerateRunner,
  'image.transform': imageTransformRunner,
  'audio.speech': audioSpeechRunner,
  'audio.transcode': audioTranscodeRunner,
  'video.slideshow': videoSlideshowRunner,
  'video.thumbnail': videoThumbnailRunner,
  'video.transcode': videoTranscodeRunner,
};
