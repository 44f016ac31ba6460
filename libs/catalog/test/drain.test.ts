import { Catalog, drainNeededMs, longestWorkerSteps, MAX_DRAIN_STEP_MS, STEP_RECORD_ALLOWANCE_MS } from '@tes/catalog';

/** The figures deploy/README.md ("Rollouts and running steps") and the worker manifests are sized from. */
describe('longestWorkerSteps', () => {
  const steps = longestWorkerSteps();

  test('one figure per catalog category, from the longest step that holds a worker', () => {
    const catalog = new Catalog({ enableTestTools: true });
    expect([...steps.keys()].sort()).toEqual(catalog.categories().sort());
    expect(steps.get('image')).toEqual({ category: 'image', tool: 'image.generate', model: 'openai/gpt-image-1.5', step: 'generate', timeoutMs: 600_000 });
    expect(steps.get('audio')).toMatchObject({ tool: 'audio.transcode', step: 'transcode', timeoutMs: 300_000 });
    // 300 s of output at 4 s each, plus 120 s
    expect(steps.get('video')).toMatchObject({ tool: 'video.transcode', step: 'transcode', timeoutMs: 1_320_000 });
    expect(steps.get('test')).toMatchObject({ tool: 'test.sleep', timeoutMs: 630_000 });
  });

  test("a queued provider's step is left out: video.generate (replicate, fal) never sets the video figure", () => {
    for (const s of steps.values()) expect(s.model).not.toMatch(/^(replicate|fal)\//);
  });

  test('the drain a worker needs: the longest step, capped, plus the time to record it', () => {
    expect(drainNeededMs(['audio'])).toBe(300_000 + STEP_RECORD_ALLOWANCE_MS);
    expect(drainNeededMs(['video'])).toBe(MAX_DRAIN_STEP_MS + STEP_RECORD_ALLOWANCE_MS);
    expect(drainNeededMs(['image', 'audio'])).toBe(600_000 + STEP_RECORD_ALLOWANCE_MS);
    expect(drainNeededMs([])).toBe(STEP_RECORD_ALLOWANCE_MS);
  });
});
