import { AppError } from '@tes/core';
import { Catalog } from '@tes/catalog';

/**
 * invalid_arguments names the field and suggests the nearest property (issue #29): a typo gave
 * four raw ajv lines, among them the contradictory "must have required property 'svg'" and
 * "'text'" of the oneOf's branches. error.message stays the code; the sentence is
 * details.hint, and each entry of details.errors keeps ajv's fields and adds its own hint.
 */
const catalog = new Catalog({ enableTestTools: true });

interface Reported {
  hint?: string;
  errors: { instancePath: string; keyword: string; message: string; params: Record<string, unknown>; hint?: string }[];
}

function refusal(tool: string, args: unknown): Reported {
  try {
    catalog.resolve(tool, args);
  } catch (err) {
    expect(err).toBeInstanceOf(AppError);
    expect((err as AppError).code).toBe('invalid_arguments');
    expect((err as AppError).message).toBe('invalid_arguments');
    return (err as AppError).details as unknown as Reported;
  }
  throw new Error('expected invalid_arguments, the arguments were accepted');
}

it('a misspelt property is named with the nearest one, and the required property it stands for is not reported too', () => {
  const d = refusal('audio.speech', { txt: 'x' });
  expect(d.hint).toBe('arguments.txt is not a property of audio.speech; did you mean text?');
  expect(d.errors).toEqual([
    {
      instancePath: '',
      keyword: 'additionalProperties',
      message: 'must NOT have additional properties',
      params: { additionalProperty: 'txt', suggestion: 'text' },
      hint: 'arguments.txt is not a property of audio.speech; did you mean text?',
    },
  ]);
});

it('a typo beside a oneOf drops the branches that contradict each other', () => {
  const d = refusal('image.render', { txt: 'x' });
  expect(d.hint).toBe('arguments.txt is not a property of image.render; did you mean text?');
  expect(d.errors.map((e) => e.keyword)).toEqual(['additionalProperties']);
  expect(refusal('image.render', { text: 'x', widht: 3 }).hint).toBe('arguments.widht is not a property of image.render; did you mean width?');
  expect(refusal('image.render', { Text: 'x' }).hint).toBe('arguments.Text is not a property of image.render; did you mean text?');
});

it('a oneOf that no branch matches says which properties it takes, once', () => {
  const d = refusal('image.render', { width: 100 });
  expect(d.hint).toBe('arguments needs one of svg or text');
  expect(d.errors).toEqual([
    expect.objectContaining({ instancePath: '', keyword: 'oneOf', params: expect.objectContaining({ oneOfRequired: ['svg', 'text'] }) }),
  ]);
  expect(refusal('image.render', { text: 'x', svg: '<svg width="1" height="1"/>' }).hint).toBe('arguments takes only one of svg or text');
});

it('nested fields are named by their path', () => {
  const d = refusal('video.slideshow', { slides: [{ txt: 'a', seconds: 1 }] });
  expect(d.hint).toBe('arguments.slides[0].txt is not a property of arguments.slides[0]; did you mean text?');
});

it('types, enums and unknown names without a near one read as sentences', () => {
  expect(refusal('image.render', { text: 5 }).hint).toBe('arguments.text must be string');
  expect(refusal('audio.speech', { text: 'x', format: 'ogg' }).hint).toBe('arguments.format must be one of wav, mp3');
  expect(refusal('audio.speech', { text: 'x', zzzzzz: 1 }).hint).toBe(
    'arguments.zzzzzz is not a property of audio.speech (its properties: model, text, voice, rate, pitch, format)',
  );
  // Two problems: both, in the order ajv found them.
  expect(refusal('audio.speech', { text: 'x', format: 'ogg', rat: 3 }).hint).toBe(
    'arguments.rat is not a property of audio.speech; did you mean rate?; arguments.format must be one of wav, mp3',
  );
});
