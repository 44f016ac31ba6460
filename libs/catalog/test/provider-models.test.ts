import { AppError } from '@tes/core';
import { Catalog, checkPriceList, DEFAULT_PRICE_LIST } from '../src';

/**
 * Provider models as the providers have them: each names its provider's model id and may
 * carry a retirement date (built in, or set by the operator); a retired model is shown
 * unavailable and refused before anything is priced. Prices follow the provider's unit.
 */
const ALL = { replicate: true, fal: true, openai: true };
const catalog = new Catalog({ enableTestTools: false, providers: ALL });
const TODAY = '2026-11-26';
const NONE = new Set<string>();

function refusal(fn: () => unknown): AppError {
  try {
    fn();
  } catch (err) {
    if (err instanceof AppError) return err;
    throw err;
  }
  throw new Error('expected a refusal');
}

interface Listed {
  name: string;
  models: { id: string; available: boolean; description: string; price: { description: string } | null }[];
}
function listed(c: Catalog, today: string, tool: string) {
  return (c.describe(DEFAULT_PRICE_LIST, 'v1', true, NONE, today).tools as Listed[]).find((t) => t.name === tool)!;
}

describe('model lifecycle', () => {
  it('gpt-image-1 (retired 2026-10-23) is listed unavailable and refused with model_unavailable, reason retired', () => {
    const gen = listed(catalog, TODAY, 'image.generate');
    expect(gen.models.find((m) => m.id === 'openai/gpt-image-1')).toMatchObject({ available: false });
    expect(gen.models.find((m) => m.id === 'openai/gpt-image-1')!.description).toMatch(/Retired on 2026-10-23/);
    const err = refusal(() => catalog.resolve('image.generate', { prompt: 'x', model: 'openai/gpt-image-1' }, NONE, TODAY));
    expect(err.code).toBe('model_unavailable');
    expect(err.details).toEqual({ model: 'openai/gpt-image-1', reason: 'retired', retiredOn: '2026-10-23' });
    // the day before, it was still offered
    expect(catalog.resolve('image.generate', { prompt: 'x', model: 'openai/gpt-image-1' }, NONE, '2026-10-22').model).toBe('openai/gpt-image-1');
  });

  it('no model offered as current is retired today, and the current OpenAI image model is offered', () => {
    const gen = listed(catalog, TODAY, 'image.generate');
    expect(gen.models.map((m) => [m.id, m.available])).toEqual([
      ['replicate/flux-schnell', true],
      ['fal/flux-schnell', true],
      ['openai/gpt-image-1.5', true],
      ['openai/gpt-image-1', false],
    ]);
    for (const tool of catalog.tools.values()) {
      for (const m of tool.models) {
        if (m.provider && m.id !== 'openai/gpt-image-1') expect(m.provider.retiresOn ?? '9999-12-31' > TODAY).toBe(true);
      }
    }
  });

  it('every provider model names its provider and the provider’s model id', () => {
    const ids = [...catalog.tools.values()].flatMap((t) => t.models.filter((m) => m.external).map((m) => [m.id, m.provider?.name, m.provider?.model]));
    expect(ids).toEqual([
      ['replicate/flux-schnell', 'replicate', 'black-forest-labs/flux-schnell'],
      ['fal/flux-schnell', 'fal', 'fal-ai/flux/schnell'],
      ['openai/gpt-image-1.5', 'openai', 'gpt-image-1.5'],
      ['openai/gpt-image-1', 'openai', 'gpt-image-1'],
      ['openai/gpt-4o-mini-tts', 'openai', 'gpt-4o-mini-tts'],
      ['replicate/kling-v1.6-standard', 'replicate', 'kwaivgi/kling-v1.6-standard'],
      ['fal/kling-video-v1-standard', 'fal', 'fal-ai/kling-video/v1/standard/text-to-video'],
    ]);
  });

  it('an operator sets a retirement date (MODEL_RETIREMENTS): refused from that day on, not the day before', () => {
    const c = new Catalog({ enableTestTools: false, providers: ALL, retirements: { 'audio.speech:openai/gpt-4o-mini-tts': '2027-01-06' } });
    const args = { model: 'openai/gpt-4o-mini-tts', text: 'hi', voice: 'alloy' };
    expect(c.resolve('audio.speech', args, NONE, '2027-01-05').model).toBe('openai/gpt-4o-mini-tts');
    expect(refusal(() => c.resolve('audio.speech', args, NONE, '2027-01-06')).details).toMatchObject({ reason: 'retired', retiredOn: '2027-01-06' });
    // the default model skips a retired one
    expect(c.resolve('audio.speech', { text: 'hi' }, NONE, '2027-01-06').model).toBe('espeak-ng');
    expect(() => new Catalog({ enableTestTools: false, retirements: { 'audio.speech:nope': '2027-01-06' } })).toThrow(/unknown model audio.speech:nope/);
  });

  it('a tool whose every model is retired is unavailable', () => {
    const c = new Catalog({ enableTestTools: false, providers: { openai: true }, retirements: { 'image.generate:openai/gpt-image-1.5': '2026-11-01' } });
    expect(refusal(() => c.resolve('image.generate', { prompt: 'x' }, NONE, TODAY)).code).toBe('tool_unavailable');
  });
});

describe('OpenAI speech input', () => {
  it('at most 4,096 characters for the OpenAI model (CreateSpeechRequest.input maxLength); espeak-ng keeps 5,000', () => {
    const openai = (text: string) => catalog.resolve('audio.speech', { model: 'openai/gpt-4o-mini-tts', text, voice: 'alloy' }, NONE, TODAY);
    expect(openai('a'.repeat(4_096)).model).toBe('openai/gpt-4o-mini-tts');
    const err = refusal(() => openai('a'.repeat(4_097)));
    expect(err.code).toBe('invalid_arguments');
    expect(JSON.stringify(err.details)).toContain('"limit":4096');
    expect(catalog.resolve('audio.speech', { model: 'espeak-ng', text: 'a'.repeat(5_000) }, NONE, TODAY).model).toBe('espeak-ng');
  });
});

describe('prices in the provider’s unit', () => {
  const quote = (args: Record<string, unknown>) => catalog.quote(catalog.resolve('image.generate', args, NONE, TODAY), DEFAULT_PRICE_LIST, 'v1');

  it('OpenAI images: an explicit quality (default medium), priced per image by quality and size plus the prompt’s tokens', () => {
    const input = catalog.resolve('image.generate', { model: 'openai/gpt-image-1.5', prompt: 'a cat' }, NONE, TODAY);
    expect(input.arguments).toMatchObject({ quality: 'medium', size: '1024x1024' });
    // medium 1024x1024: 1,056 image tokens at $40/1M = 42,240 µ$; prompt 'a cat' (5 bytes + 64) at $6/1M: 414 µ$
    expect(quote({ model: 'openai/gpt-image-1.5', prompt: 'a cat' }).maximumChargeMicros).toBe(42_240 + 414);
    // high 1536x1024, two images: 2 x 6,208 tokens x 40 = 496,640, plus the prompt once
    expect(quote({ model: 'openai/gpt-image-1.5', prompt: 'a cat', quality: 'high', size: '1536x1024', count: 2 }).maximumChargeMicros).toBe(496_640 + 414);
    expect(quote({ model: 'openai/gpt-image-1.5', prompt: 'a cat', quality: 'low', size: '1024x1536' }).maximumChargeMicros).toBe(408 * 40 + 414);
  });

  it('OpenAI images settle from the reported usage, prorated to the images delivered', () => {
    const tool = catalog.get('image.generate')!;
    const args = { model: 'openai/gpt-image-1.5', prompt: 'a cat', quality: 'high', size: '1024x1024', count: 2, format: 'png' };
    const usage = { inputTokens: 20, outputTokens: 8_320 };
    // (20 x 6 + 8,320 x 40) = 332,920 µ$ for both images
    expect(catalog.cost(tool, 'openai/gpt-image-1.5', 2, DEFAULT_PRICE_LIST, args, usage)).toBe(332_920);
    // one of two delivered: half, rounded up
    expect(catalog.cost(tool, 'openai/gpt-image-1.5', 1, DEFAULT_PRICE_LIST, args, usage)).toBe(166_460);
  });

  it('a usage report that cannot be priced (absent, negative, absurd) is charged as quoted: the table tokens per image delivered', () => {
    const tool = catalog.get('image.generate')!;
    const args = { model: 'openai/gpt-image-1.5', prompt: 'a cat', quality: 'low', size: '1024x1024', count: 2, format: 'png' };
    const quoted = catalog.cost(tool, 'openai/gpt-image-1.5', 2, DEFAULT_PRICE_LIST, args);
    expect(quoted).toBe(2 * 272 * 40 + 414);
    for (const usage of [undefined, { inputTokens: -1, outputTokens: 10 }, { inputTokens: 1, outputTokens: 1e12 }, { inputTokens: 1.5, outputTokens: 2 }]) {
      expect(catalog.cost(tool, 'openai/gpt-image-1.5', 2, DEFAULT_PRICE_LIST, args, usage)).toBe(quoted);
    }
    // a price list published before token prices (a flat price per image) ignores the usage
    const flat = {
      currency: 'usd' as const,
      tools: { 'image.generate': { models: { 'openai/gpt-image-1.5': { unitPriceMicros: 70_000, minimumMicros: 70_000 } } } },
    };
    expect(catalog.cost(tool, 'openai/gpt-image-1.5', 2, flat, args, { inputTokens: 10, outputTokens: 544 })).toBe(140_000);
  });

  it('fal flux: per megapixel, each image’s size rounded up to whole megapixels of 10^6 pixels (fal’s worst reading)', () => {
    expect(quote({ model: 'fal/flux-schnell', prompt: 'x', size: '1024x1024' }).maximumChargeMicros).toBe(8_000);
    expect(quote({ model: 'fal/flux-schnell', prompt: 'x', size: '1536x1024' }).maximumChargeMicros).toBe(8_000);
    expect(quote({ model: 'fal/flux-schnell', prompt: 'x', size: '1024x1536', count: 3 }).maximumChargeMicros).toBe(24_000);
  });

  it('Replicate flux: per image, the unit Replicate bills', () => {
    expect(quote({ model: 'replicate/flux-schnell', prompt: 'x', size: '1536x1024', count: 2 }).maximumChargeMicros).toBe(8_000);
  });

  it('says so in the price description', () => {
    const gen = listed(catalog, TODAY, 'image.generate');
    const price = (id: string) => gen.models.find((m) => m.id === id)!.price!.description;
    expect(price('fal/flux-schnell')).toBe('$0.004 per megapixel (each image rounded up to whole megapixels of 10^6 pixels)');
    expect(price('openai/gpt-image-1.5')).toMatch(/^\$40 per 1M image tokens .*\$6 per 1M prompt tokens/);
  });
});

it('a published price list is checked for the provider-unit prices too', () => {
  expect(checkPriceList(DEFAULT_PRICE_LIST)).toEqual([]);
  const bad = {
    currency: 'usd',
    tools: { 'image.generate': { models: { 'fal/flux-schnell': { unitPriceMicros: 1, minimumMicros: 1, megapixelPriceMicros: -4 } } } },
  };
  expect(checkPriceList(bad)).toEqual(['tools["image.generate"].models["fal/flux-schnell"].megapixelPriceMicros must be a non-negative integer']);
});
