import type { Quote, TesClient, ToolArguments, ToolName } from '../src';
import { fakeApi, json, untyped } from './fake-api';

/**
 * Compile-time checks of tool names and arguments (tool-types.ts). `npm run typecheck`
 * (tsc -p tsconfig.test.json) checks this file: each `@ts-expect-error` line must fail to
 * compile, or tsc reports the directive as unused and the typecheck fails. So a misspelled
 * tool name or a wrong argument that compiled would fail `npm test`.
 *
 * The calls sit in a function that is never called: they are here for the compiler.
 */
function compileOnly(tes: TesClient, names: { fromConfig: string; known: ToolName }): void {
  // Known tools: arguments checked against the catalog's schemas.
  void tes.run('image.render', { text: 'x' });
  void tes.run('image.render', { svg: '<svg/>', width: 64, format: 'jpeg' });
  void tes.quote('video.slideshow', {
    slides: [
      { text: 'Hi', seconds: 1, color: '#ffffff' },
      { fileId: 'file_x', seconds: 2 },
    ],
  });
  void tes.submit('test.sleep', { seconds: 0, steps: 1, costMicrosPerStep: 5 }, { priceVersion: 'v', maximumChargeMicros: 5, idempotencyKey: 'key-00001' });
  void tes.run('audio.speech', { text: 'Hej', model: 'openai/gpt-4o-mini-tts', voice: 'nova' });
  void tes.run('audio.speech', { text: 'Hej', voice: 'sv' });

  // A tool these types do not know (a newer server): a `string` value, arguments untyped.
  void tes.run(names.fromConfig, { anything: 1 });
  void tes.run(untyped('audio.music'), { prompt: 'a tune', seconds: 30 });
  // A variable of the union: the arguments of any of its tools.
  void tes.quote(names.known, { text: 'x' });

  // @ts-expect-error the issue's example: a misspelled name with misspelled arguments
  void tes.run('image.rendr', { txet: 42 });
  // @ts-expect-error a misspelled name, even with good arguments
  void tes.run('image.rendr', { text: 'x' });
  // @ts-expect-error a misspelled argument of a known tool
  void tes.run('image.render', { txet: 'x' });
  // @ts-expect-error a wrong type
  void tes.run('image.render', { text: 42 });
  // @ts-expect-error a value outside the enum
  void tes.run('image.render', { text: 'x', format: 'gif' });
  // @ts-expect-error image.render takes exactly one of svg and text
  void tes.run('image.render', { text: 'x', svg: '<svg/>' });
  // @ts-expect-error ...and at least one
  void tes.run('image.render', { width: 64 });
  // @ts-expect-error a required argument is missing
  void tes.quote('test.sleep', { seconds: 1, steps: 1 });
  // @ts-expect-error a nested item: a slide is an image or a text card, not both
  void tes.quote('video.slideshow', { slides: [{ text: 'Hi', fileId: 'file_x', seconds: 1 }] });
  // @ts-expect-error a nested item: color belongs to text cards only (dependentRequired)
  void tes.quote('video.slideshow', { slides: [{ fileId: 'file_x', seconds: 1, color: '#ffffff' }] });
  // @ts-expect-error an OpenAI voice needs the OpenAI model (if/then/else)
  void tes.run('audio.speech', { text: 'Hej', voice: 'nova' });
  void tes.submit(
    'test.sleep',
    // @ts-expect-error submit checks too
    { seconds: 'soon', steps: 1, costMicrosPerStep: 5 },
    { priceVersion: 'v', maximumChargeMicros: 5, idempotencyKey: 'key-00001' },
  );

  // ToolArguments<T> names the type for code that builds arguments ahead of the call.
  const render: ToolArguments<'image.render'> = { text: 'x', width: 800 };
  void tes.run('image.render', render);
  // @ts-expect-error width is a number
  const wrong: ToolArguments<'image.render'> = { text: 'x', width: '800' };
  void tes.run('image.render', wrong);
  // Without a tool: any JSON object, as before.
  const any: ToolArguments = { whatever: [1, 2] };
  void tes.run(names.fromConfig, any);
}

const QUOTE: Quote = {
  tool: 'image.render',
  model: 'sharp',
  priceVersion: 'v1',
  currency: 'usd',
  minimumChargeMicros: 1,
  maximumChargeMicros: 2,
  unit: 'megapixel',
  estimatedUnits: 1,
};

it('typed and untyped calls send the same request (the types change nothing at run time)', async () => {
  expect(compileOnly).toBeInstanceOf(Function);
  const api = fakeApi(() => json(200, { data: QUOTE }));
  await expect(api.client.quote('image.render', { text: 'x' })).resolves.toEqual(QUOTE);
  await expect(api.client.quote(untyped('audio.music'), { prompt: 'x' })).resolves.toEqual(QUOTE);
  expect(api.sent.map((s) => `${s.method} ${s.path}`)).toEqual(['POST /tools/quote', 'POST /tools/quote']);
});
