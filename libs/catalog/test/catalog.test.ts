import { AppError } from '@tes/core';
import {
  builtinTools,
  Catalog,
  checkPriceList,
  DEFAULT_PRICE_LIST,
  DEFAULT_TIMEOUT_MICROS_PER_SECOND,
  IMAGE_RENDER_LIMITS,
  type PriceList,
} from '@tes/catalog';

const VERSION = '2026-11-01.1';
const catalog = new Catalog({ enableTestTools: true, providers: { replicate: true, fal: true, openai: true } });

function quoteOf(tool: string, args: Record<string, unknown>, prices: PriceList = DEFAULT_PRICE_LIST) {
  return catalog.quote(catalog.resolve(tool, args), prices, VERSION);
}

/** The AppError code `fn` throws; fails the test when it throws anything else or nothing. */
function codeOf(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(AppError);
    return (err as AppError).code;
  }
  throw new Error('expected an AppError, nothing was thrown');
}

const SVG = '<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><rect width="10" height="10"/></svg>';
const svgWith = (inner: string) => `<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10">${inner}</svg>`;

describe('examples', () => {
  it('every tool example and every model example validates and can be quoted', () => {
    expect([...catalog.tools.keys()].sort()).toEqual(
      expect.arrayContaining([
        'audio.speech',
        'audio.transcode',
        'image.render',
        'image.transform',
        'test.sleep',
        'video.slideshow',
        'video.thumbnail',
        'video.transcode',
      ]),
    );
    for (const tool of catalog.tools.values()) {
      // a retired model's example is refused (provider-models.test.ts)
      const examples = [tool.example, ...tool.models.filter((m) => !m.provider?.retiresOn).map((m) => ({ ...m.example, model: m.id }))];
      for (const example of examples) {
        const resolved = catalog.resolve(tool.name, example);
        expect(resolved.tool.name).toBe(tool.name);
        expect(tool.models.map((m) => m.id)).toContain(resolved.model);
        expect(resolved.plan.length).toBeGreaterThan(0);
        const q = catalog.quote(resolved, DEFAULT_PRICE_LIST, VERSION);
        expect(Number.isSafeInteger(q.maximumChargeMicros)).toBe(true);
      }
    }
  });

  it('every built-in tool is registered under its own name, and plans only steps it declares', () => {
    const all = builtinTools({ replicate: true, fal: true, openai: true });
    for (const [name, tool] of Object.entries(all)) {
      expect(tool.name).toBe(name);
      for (const example of [tool.example, ...tool.models.filter((m) => !m.provider?.retiresOn).map((m) => ({ ...m.example, model: m.id }))]) {
        for (const step of catalog.resolve(name, example).plan) expect(tool.steps).toContain(step.name);
      }
    }
  });

  it('resolve applies schema defaults and does not touch the caller arguments', () => {
    const args = { text: 'hi' };
    const r = catalog.resolve('image.render', args);
    // width and height have no schema default: an SVG keeps its own size (imageRenderSize)
    expect(r.arguments).toEqual({ text: 'hi', model: 'sharp', format: 'png', quality: 90, background: '#ffffff', color: '#111111', fontSize: 64 });
    expect(args).toEqual({ text: 'hi' });
  });
});

describe('quote', () => {
  it('is deterministic: the same input gives the same maximum, whatever the key order', () => {
    const a = quoteOf('image.render', { text: 'x', width: 1200, height: 900, format: 'jpeg' });
    const b = quoteOf('image.render', { format: 'jpeg', height: 900, width: 1200, text: 'x' });
    const c = new Catalog({ enableTestTools: true }).quote(
      new Catalog({ enableTestTools: true }).resolve('image.render', { text: 'x', width: 1200, height: 900, format: 'jpeg' }),
      structuredClone(DEFAULT_PRICE_LIST),
      VERSION,
    );
    expect(b).toEqual(a);
    expect(c).toEqual(a);
    expect(a).toMatchObject({ tool: 'image.render', model: 'sharp', priceVersion: VERSION, currency: 'usd', unit: 'megapixel' });
  });

  it.each([
    [16, 16, 1, 1_000], // tiny images pay the minimum
    [1000, 1000, 1, 1_000], // exactly one megapixel
    [1000, 1001, 2, 2_000], // one pixel over starts a second megapixel
    [1024, 1024, 2, 2_000],
    [1200, 900, 2, 2_000],
    [4096, 4096, 17, 17_000], // 16.78 MP
  ])('image.render %ix%i costs %i started megapixels = %i micros', (width, height, units, micros) => {
    const q = quoteOf('image.render', { text: 'x', width, height });
    expect(q.estimatedUnits).toBe(units);
    expect(q.maximumChargeMicros).toBe(micros);
    expect(q.minimumChargeMicros).toBe(1_000);
  });

  it('image.render follows the price list it is given', () => {
    const prices: PriceList = { currency: 'usd', tools: { 'image.render': { models: { sharp: { unitPriceMicros: 2_500, minimumMicros: 4_000 } } } } };
    expect(quoteOf('image.render', { text: 'x', width: 100, height: 100 }, prices).maximumChargeMicros).toBe(4_000);
    expect(quoteOf('image.render', { text: 'x', width: 2000, height: 2000 }, prices).maximumChargeMicros).toBe(10_000);
  });

  it('test.sleep maximum is steps x costMicrosPerStep', () => {
    expect(quoteOf('test.sleep', { seconds: 0, steps: 3, costMicrosPerStep: 2_500 }).maximumChargeMicros).toBe(7_500);
    expect(quoteOf('test.sleep', { seconds: 1, steps: 20, costMicrosPerStep: 1_000_000 }).maximumChargeMicros).toBe(20_000_000);
    expect(quoteOf('test.sleep', { seconds: 1, steps: 5, costMicrosPerStep: 0 }).maximumChargeMicros).toBe(0);
    expect(catalog.resolve('test.sleep', { seconds: 0, steps: 4, costMicrosPerStep: 1 }).plan).toHaveLength(4);
  });

  it("prices a step's units as the quote prices the estimate, before any cap", () => {
    const render = catalog.get('image.render')!;
    const prices: PriceList = { currency: 'usd', tools: { 'image.render': { models: { sharp: { unitPriceMicros: 2_500, minimumMicros: 4_000 } } } } };
    expect(catalog.cost(render, 'sharp', 1, prices, {})).toBe(4_000); // the minimum
    expect(catalog.cost(render, 'sharp', 3, prices, {})).toBe(7_500);
    expect(catalog.cost(render, 'sharp', 0, prices, {})).toBe(4_000); // a billed step with no units still pays the minimum
    // test.sleep prices from its arguments: one unit per step at costMicrosPerStep, whatever the list says
    const sleep = catalog.resolve('test.sleep', { seconds: 0, steps: 3, costMicrosPerStep: 700 });
    expect(catalog.cost(sleep.tool, 'sleep', 1, DEFAULT_PRICE_LIST, sleep.arguments)).toBe(700);
    expect(sleep.plan.map((s) => [s.name, s.label, s.billed])).toEqual([
      ['sleep', 'sleep_0', true],
      ['sleep', 'sleep_1', true],
      ['sleep', 'sleep_2', true],
    ]);
  });

  it('a model missing from the price list cannot be quoted', () => {
    const r = catalog.resolve('test.sleep', { seconds: 0, steps: 1, costMicrosPerStep: 1 });
    expect(codeOf(() => catalog.quote(r, { currency: 'usd', tools: {} }, VERSION))).toBe('model_unavailable');
  });
});

describe('validation', () => {
  it.each([
    ['width above the maximum', { text: 'x', width: 5000 }],
    ['width below the minimum', { text: 'x', width: 15 }],
    ['a non-integer width', { text: 'x', width: 100.5 }],
    ['a width given as a string', { text: 'x', width: '100' }],
    ['an unknown property', { text: 'x', colour: '#000000' }],
    ['both svg and text', { text: 'x', svg: SVG }],
    ['neither svg nor text', { width: 100 }],
    ['text above the maximum length', { text: 'x'.repeat(IMAGE_RENDER_LIMITS.maxTextChars + 1) }],
    ['an unknown model', { text: 'x', model: 'dall-e' }],
    ['a document without <svg>', { svg: '<html></html>' }],
    ['a DOCTYPE (entity expansion)', { svg: `<?xml version="1.0"?><!DOCTYPE svg [<!ENTITY a "aaaa">]>${SVG}` }],
    ['an ENTITY declaration', { svg: `<!ENTITY x SYSTEM "file:///etc/passwd">${SVG}` }],
    ['a local file reference', { svg: svgWith('<image href="file:///etc/passwd"/>') }],
    ['a network reference through xlink', { svg: svgWith('<image xlink:href="http://x"/>') }],
    ['a network reference with single quotes and spaces', { svg: svgWith("<use href = 'https://evil.example/a.svg#x'/>") }],
  ])('image.render rejects %s with invalid_arguments', (_what, args) => {
    expect(codeOf(() => catalog.resolve('image.render', args))).toBe('invalid_arguments');
  });

  it.each([
    ['an in-document fragment', svgWith('<defs><circle id="a" r="2"/></defs><use href="#a"/>')],
    ['a data: URL', svgWith('<image href="data:image/png;base64,AAAA" width="1" height="1"/>')],
  ])('image.render accepts an svg referencing %s', (_what, svg) => {
    expect(catalog.resolve('image.render', { svg }).arguments.svg).toBe(svg);
  });

  it.each([
    ['steps 0', { seconds: 0, steps: 0, costMicrosPerStep: 0 }],
    ['steps 21', { seconds: 0, steps: 21, costMicrosPerStep: 0 }],
    ['seconds above 600', { seconds: 601, steps: 1, costMicrosPerStep: 0 }],
    ['a negative cost', { seconds: 0, steps: 1, costMicrosPerStep: -1 }],
    ['a cost above 1,000,000', { seconds: 0, steps: 1, costMicrosPerStep: 1_000_001 }],
    ['a fractional cost', { seconds: 0, steps: 1, costMicrosPerStep: 0.5 }],
    ['a missing field', { seconds: 0, steps: 1 }],
  ])('test.sleep rejects %s with invalid_arguments', (_what, args) => {
    expect(codeOf(() => catalog.resolve('test.sleep', args))).toBe('invalid_arguments');
  });

  it('reports each ajv error with its instancePath', () => {
    try {
      catalog.resolve('image.render', { text: 'x', width: 5000, height: 15 });
      throw new Error('not rejected');
    } catch (err) {
      const errors = (err as AppError).details?.errors as { instancePath: string }[];
      expect(errors.map((e) => e.instancePath)).toEqual(expect.arrayContaining(['/width', '/height']));
    }
  });

  it('an unknown tool is tool_not_found', () => {
    expect(codeOf(() => catalog.resolve('image.nope', { text: 'x' }))).toBe('tool_not_found');
  });

  it('test.sleep exists only when test tools are enabled', () => {
    const prod = new Catalog({ enableTestTools: false });
    expect(prod.get('test.sleep')).toBeUndefined();
    expect(prod.categories()).not.toContain('test');
    expect(codeOf(() => prod.resolve('test.sleep', { seconds: 0, steps: 1, costMicrosPerStep: 0 }))).toBe('tool_not_found');
    const listed = prod.describe(DEFAULT_PRICE_LIST, VERSION, true).tools as { name: string }[];
    expect(listed.map((t) => t.name)).not.toContain('test.sleep');
    expect(listed.map((t) => t.name)).toContain('image.render');
    expect(catalog.categories()).toContain('test');
  });
});

it('provider models are unavailable without their credentials, and the tool with them', () => {
  const none = new Catalog({ enableTestTools: false });
  expect(() => none.resolve('image.generate', { prompt: 'x' })).toThrow(expect.objectContaining({ code: 'tool_unavailable' }));
  const falOnly = new Catalog({ enableTestTools: false, providers: { fal: true } });
  expect(falOnly.resolve('image.generate', { prompt: 'x' }).model).toBe('fal/flux-schnell');
  expect(() => falOnly.resolve('image.generate', { prompt: 'x', model: 'openai/gpt-image-1.5' })).toThrow(
    expect.objectContaining({ code: 'model_unavailable' }),
  );
  const listed = (none.describe(DEFAULT_PRICE_LIST, VERSION, true).tools as { name: string; available: boolean }[]).find((t) => t.name === 'image.generate');
  expect(listed?.available).toBe(false);
});

describe('describe', () => {
  it('has the shape of GET /tools data', () => {
    const d = catalog.describe(DEFAULT_PRICE_LIST, VERSION, false);
    expect(d).toMatchObject({ priceVersion: VERSION, currency: 'usd', executionEnabled: false });
    const tools = (d.tools as Record<string, unknown>[]).filter((t) => (t.models as { available: boolean }[]).some((m) => m.available));
    expect(tools.length).toBeGreaterThanOrEqual(8);
    for (const t of tools) {
      expect(t).toEqual({
        name: expect.any(String),
        description: expect.any(String),
        category: expect.any(String),
        available: true,
        inputSchema: expect.objectContaining({ type: 'object' }),
        example: expect.any(Object),
        models: expect.arrayContaining([
          { id: expect.any(String), description: expect.any(String), available: true, example: expect.any(Object), price: { description: expect.any(String) } },
        ]),
        price: { minimumMicros: expect.any(Number), unit: expect.any(String), description: expect.stringMatching(/^from /) },
      });
    }
    const render = tools.find((t) => t.name === 'image.render')!;
    expect((render.price as { minimumMicros: number }).minimumMicros).toBe(1_000);
    expect(catalog.describe(DEFAULT_PRICE_LIST, VERSION, true).executionEnabled).toBe(true);
  });

  it('a tool whose models are not priced is listed as unavailable with no price', () => {
    const d = catalog.describe({ currency: 'usd', tools: {} }, VERSION, true);
    for (const t of d.tools as { available: boolean; price: unknown; models: { available: boolean; price: unknown }[] }[]) {
      expect(t.available).toBe(false);
      expect(t.price).toBeNull();
      expect(t.models.every((m) => !m.available && m.price === null)).toBe(true);
    }
  });
});

describe('a step that runs out of its deadline (issue #25)', () => {
  const render = catalog.get('image.render')!;
  const modelPrices = (tool: string) =>
    Object.fromEntries(
      (
        (catalog.describe(DEFAULT_PRICE_LIST, VERSION, true).tools as { name: string; models: { id: string; price: { description: string } | null }[] }[]).find(
          (t) => t.name === tool,
        )?.models ?? []
      ).map((m) => [m.id, m.price?.description]),
    );

  it('costs every started second of its deadline at the model rate; a list without one (published before the field) keeps timeouts free', () => {
    expect(catalog.timeoutCost(render, 'sharp', 60_000, DEFAULT_PRICE_LIST)).toBe(60 * 100); // $0.006
    expect(catalog.timeoutCost(render, 'sharp', 1_001, DEFAULT_PRICE_LIST)).toBe(2 * 100);
    const older: PriceList = { currency: 'usd', tools: { 'image.render': { models: { sharp: { unitPriceMicros: 1_000, minimumMicros: 1_000 } } } } };
    expect(catalog.timeoutCost(render, 'sharp', 60_000, older)).toBe(60 * DEFAULT_TIMEOUT_MICROS_PER_SECOND);
    expect(DEFAULT_TIMEOUT_MICROS_PER_SECOND).toBe(0);
    const free: PriceList = {
      currency: 'usd',
      tools: { 'image.render': { models: { sharp: { unitPriceMicros: 1_000, minimumMicros: 1_000, timeoutMicrosPerSecond: 0 } } } },
    };
    expect(catalog.timeoutCost(render, 'sharp', 60_000, free)).toBe(0);
  });

  it('a provider model is never charged for it: the time was the provider wait', () => {
    expect(catalog.timeoutCost(catalog.get('image.generate')!, 'fal/flux-schnell', 600_000, DEFAULT_PRICE_LIST)).toBe(0);
    expect(catalog.timeoutCost(catalog.get('audio.speech')!, 'openai/gpt-4o-mini-tts', 180_000, DEFAULT_PRICE_LIST)).toBe(0);
  });

  it('GET /tools says so in the price description of every model that runs on our workers, and of no provider model', () => {
    expect(modelPrices('image.render')).toEqual({
      sharp:
        '$0.001 per started megapixel, minimum $0.001; a step that runs out of its deadline (step_timeout) costs $0.0001 per started second of the deadline, at most the reservation',
    });
    const speech = modelPrices('audio.speech');
    expect(speech['espeak-ng']).toMatch(/step_timeout\) costs \$0\.0001 per started second/);
    expect(speech['openai/gpt-4o-mini-tts']).not.toMatch(/deadline/);
    for (const description of Object.values(modelPrices('image.generate'))) expect(description ?? '').not.toMatch(/deadline/);
    const tool = (catalog.describe(DEFAULT_PRICE_LIST, VERSION, true).tools as { name: string; price: { description: string } }[]).find(
      (t) => t.name === 'image.render',
    );
    expect(tool?.price.description).toMatch(/^from \$0\.001 per started megapixel, minimum \$0\.001; a step that runs out of its deadline/);
  });
});

describe('checkPriceList', () => {
  it('accepts the default list', () => {
    expect(checkPriceList(DEFAULT_PRICE_LIST)).toEqual([]);
  });

  it('accepts a list that names no timeout rate (published before it existed)', () => {
    expect(checkPriceList({ currency: 'usd', tools: { t: { models: { m: { unitPriceMicros: 1, minimumMicros: 1 } } } } })).toEqual([]);
  });

  it.each([
    ['not an object', 'prices', /JSON object/],
    ['null', null, /JSON object/],
    ['another currency', { ...DEFAULT_PRICE_LIST, currency: 'eur' }, /currency/],
    ['no tools', { currency: 'usd' }, /tools must be an object/],
    ['a tool without models', { currency: 'usd', tools: { 'image.render': {} } }, /models must be an object/],
    ['a negative price', { currency: 'usd', tools: { t: { models: { m: { unitPriceMicros: -1, minimumMicros: 0 } } } } }, /unitPriceMicros/],
    ['a fractional minimum', { currency: 'usd', tools: { t: { models: { m: { unitPriceMicros: 1, minimumMicros: 0.5 } } } } }, /minimumMicros/],
    ['a price given as a string', { currency: 'usd', tools: { t: { models: { m: { unitPriceMicros: '1', minimumMicros: 1 } } } } }, /unitPriceMicros/],
    ['a missing field', { currency: 'usd', tools: { t: { models: { m: { unitPriceMicros: 1 } } } } }, /minimumMicros/],
    ['a null model price', { currency: 'usd', tools: { t: { models: { m: null } } } }, /unitPriceMicros/],
    [
      'a negative timeout rate',
      { currency: 'usd', tools: { t: { models: { m: { unitPriceMicros: 1, minimumMicros: 1, timeoutMicrosPerSecond: -1 } } } } },
      /timeoutMicrosPerSecond/,
    ],
  ])('finds a problem in a list with %s', (_what, list, problem) => {
    const problems = checkPriceList(list);
    expect(problems.length).toBeGreaterThan(0);
    expect(problems.join('\n')).toMatch(problem);
  });
});
