import { Catalog } from './catalog';
import { AUDIO_SPEECH_LIMITS, OPENAI_SPEECH_MAX_CHARS } from './tools/audio-speech';
import { TEST_SLEEP_MAX_SECONDS } from './tools/test-sleep';
import type { ToolName } from './tools';
import { VIDEO_SLIDESHOW_LIMITS } from './tools/video-slideshow';
import { VIDEO_THUMBNAIL_LIMITS } from './tools/video-thumbnail';
import { VIDEO_TRANSCODE_LIMITS } from './tools/video-transcode';
import { DEFAULT_STEP_TIMEOUT_MS, type ModelDefinition, type StepPlan } from './types';

/**
 * The longest a worker's drain waits for a step it is running (15 min). A category whose longest
 * step is longer gets this grace: a step still running when it ends is aborted, its execution
 * released and resumed by another worker after its last completed step, so that step runs again
 * from its start (deploy/README.md, "Rollouts and running steps").
 */
export const MAX_DRAIN_STEP_MS = 15 * 60_000;

/**
 * What a drain allows after a step's deadline for recording the step: storing its artifacts
 * (50 MiB at most per artifact) and the statement that records its end. Aborted past it, the
 * step's work is lost like a step aborted mid-way.
 */
export const STEP_RECORD_ALLOWANCE_MS = 30_000;

/** What a worker needs after its drain: releasing the executions it aborted (each a statement and a publish). */
export const RELEASE_ALLOWANCE_MS = 5_000;

const FILE_ID = 'file_01ARZ3NDEKTSV4RRFFQ69G5FAV';

/**
 * Per built-in tool, the inputs whose plans hold its longest steps: the arguments at the limits
 * the schema and the tool's own checks allow (each is resolved, so an input the tool refuses
 * fails the catalog test, and a limit raised in the tool's constants moves the figure with it).
 * Every model of the tool is planned with each. Keyed by every tool name, so a new
 * tool does not compile without its entry.
 */
const LONGEST_INPUTS: Readonly<Record<ToolName, readonly Record<string, unknown>[]>> = {
  'image.render': [{ text: 'x' }],
  'image.generate': [{ prompt: 'x', count: 4 }],
  'image.transform': [{ fileId: FILE_ID }],
  // the longest text every model takes (OpenAI's is shorter than espeak-ng's)
  'audio.speech': [{ text: 'x'.repeat(Math.min(AUDIO_SPEECH_LIMITS.maxTextChars, OPENAI_SPEECH_MAX_CHARS)) }],
  'audio.transcode': [{ fileId: FILE_ID, format: 'wav' }],
  'video.slideshow': [longestSlideshow()],
  'video.thumbnail': [{ fileId: FILE_ID, times: Array.from({ length: VIDEO_THUMBNAIL_LIMITS.maxFrames }, () => 0) }],
  // no duration: to the input's end, at most the cap; and the cap named
  'video.transcode': [{ fileId: FILE_ID }, { fileId: FILE_ID, durationSeconds: VIDEO_TRANSCODE_LIMITS.maxDurationSeconds }],
  'video.generate': [{ prompt: 'x', durationSeconds: 10 }],
  'test.sleep': [{ seconds: TEST_SLEEP_MAX_SECONDS, steps: 1, costMicrosPerStep: 0 }],
};

/** Slides of the longest allowed length adding up to the longest allowed show. */
function longestSlideshow(): Record<string, unknown> {
  const L = VIDEO_SLIDESHOW_LIMITS;
  const count = Math.min(L.maxSlides, Math.ceil(L.maxTotalSeconds / L.maxSlideSeconds));
  const seconds = Math.min(L.maxSlideSeconds, L.maxTotalSeconds / count);
  return { slides: Array.from({ length: count }, () => ({ text: 'x', seconds })), width: L.maxWidth, height: L.maxHeight };
}

/** A step that holds a worker slot for its whole deadline: all but a queued provider's (ModelDefinition.queued). */
function holdsWorker(model: ModelDefinition, step: StepPlan): boolean {
  return !(step.external === true && model.queued === true);
}

/** The step of a category whose deadline is the longest of those that hold a worker slot. */
export interface LongestStep {
  category: string;
  tool: string;
  model: string;
  step: string;
  timeoutMs: number;
}

/**
 * Per queue category, the longest deadline of a step that runs on our workers, from each tool's
 * plan at its arguments' limits (LONGEST_INPUTS). A queued provider's step is left out: it waits
 * for its job without holding the worker, and a drain that aborts its create or poll releases it
 * to be resumed by its recorded reference. OpenAI's one-request steps are counted: released
 * mid-request, their outcome is unknown and the execution would go to needs_review.
 */
export function longestWorkerSteps(): Map<string, LongestStep> {
  const catalog = new Catalog({ enableTestTools: true, providers: { replicate: true, fal: true, openai: true } });
  const longest = new Map<string, LongestStep>();
  for (const [name, inputs] of Object.entries(LONGEST_INPUTS)) {
    const tool = catalog.get(name);
    if (!tool) throw new Error(`${name} is not in the catalog`);
    // A model with a retirement date is on its way out: it never sets a figure (its successor has the same plan).
    for (const model of tool.models.filter((m) => !m.provider?.retiresOn)) {
      for (const input of inputs) {
        const { plan } = catalog.resolve(name, { ...input, model: model.id });
        for (const step of plan) {
          if (!holdsWorker(model, step)) continue;
          const timeoutMs = step.timeoutMs ?? DEFAULT_STEP_TIMEOUT_MS;
          const known = longest.get(tool.category);
          if (!known || timeoutMs > known.timeoutMs)
            longest.set(tool.category, { category: tool.category, tool: name, model: model.id, step: step.name, timeoutMs });
        }
      }
    }
  }
  return longest;
}

/**
 * The drain a worker of these categories needs so that a step it started before SIGTERM ends and
 * is recorded before the drain aborts it: the longest of their steps (longestWorkerSteps), at
 * most MAX_DRAIN_STEP_MS, plus STEP_RECORD_ALLOWANCE_MS. Its SHUTDOWN_TIMEOUT_MS needs
 * RELEASE_ALLOWANCE_MS more (the worker drains for SHUTDOWN_TIMEOUT_MS − 5 s).
 */
export function drainNeededMs(categories: readonly string[]): number {
  const steps = longestWorkerSteps();
  const longest = Math.max(0, ...categories.map((c) => steps.get(c)?.timeoutMs ?? 0));
  return Math.min(longest, MAX_DRAIN_STEP_MS) + STEP_RECORD_ALLOWANCE_MS;
}
