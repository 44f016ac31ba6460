import type { Runners } from '../runner';
import { audioSpeechRunner } from './audio-speech';
import { audioTranscodeRunner } from './audio-transcode';
import { imageGenerateRunner } from './image-generate';
import { imageRenderRunner } from './image-render';
import { imageTransformRunner } from './image-transform';
import { testSleepRunner } from './test-sleep';
import { videoGenerateRunner } from './video-generate';
import { videoSlideshowRunner } from './video-slideshow';
import { videoThumbnailRunner } from './video-thumbnail';
import { videoTranscodeRunner } from './video-transcode';

/** The worker side of every built-in catalog tool (the `Runners` type makes it complete). */
export const RUNNERS: Runners = {
  'image.render': imageRenderRunner,
  'image.generate': imageGenerateRunner,
  'image.transform': imageTransformRunner,
  'audio.speech': audioSpeechRunner,
  'audio.transcode': audioTranscodeRunner,
  'video.slideshow': videoSlideshowRunner,
  'video.thumbnail': videoThumbnailRunner,
  'video.transcode': videoTranscodeRunner,
  'video.generate': videoGenerateRunner,
  'test.sleep': testSleepRunner,
};
