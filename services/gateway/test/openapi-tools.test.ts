import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import Ajv2020 from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import { Catalog } from '@tes/catalog';
import { catalogTools, renderOpenApi, withToolRequestBodies } from '../scripts/generate-openapi-tools';
import { RequestSchemas, type OpenApiDocument } from '../src/routing/request-schemas';

const ROOT = join(__dirname, '../../..');
const OPENAPI = join(ROOT, 'services/gateway/openapi.json');

type Json = Record<string, unknown>;

/**
 * The request bodies of quote and submit in openapi.json are typed per tool from the catalog's
 * input schemas by `npm run generate:openapi` and committed: the catalog is their one owner.
 * A change to a tool's schema without a regeneration fails here.
 */
it('openapi.json is what `npm run generate:openapi` writes from the catalog', async () => {
  const pkg = JSON.parse(await readFile(join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
  expect(pkg.scripts['generate:openapi']).toContain('services/gateway/scripts/dist/generate-openapi-tools.js services/gateway/openapi.json');
  const committed = await readFile(OPENAPI, 'utf8');
  const fresh = renderOpenApi(committed, catalogTools());
  if (committed !== fresh) {
    let at = 0;
    while (committed[at] === fresh[at]) at++;
    const line = committed.slice(0, at).split('\n').length;
    throw new Error(
      `services/gateway/openapi.json disagrees with the catalog's input schemas (from line ${line} on): ` +
        'run `npm run generate:openapi` at the repository root and commit the file and clients/typescript/src/schema.ts',
    );
  }
});

describe('the typed request bodies', () => {
  const doc = withToolRequestBodies(JSON.parse(readFileSync(OPENAPI, 'utf8')) as Json, catalogTools());
  // ajv with the catalog's settings (strict; a oneOf branch may require a property of its parent), and OpenAPI's discriminator
  const ajv = new Ajv2020({ strict: true, strictRequired: false, allErrors: true, discriminator: true });
  addFormats(ajv);
  ajv.addVocabulary(Object.keys(doc));
  ajv.addSchema({ ...doc, $id: 'https://typed.invalid/openapi.json' });
  const typed = (name: string) =>
    ajv.compile({ $ref: `https://typed.invalid/openapi.json#/components/requestBodies/${name}/content/application~1json/schema` });
  const quote = typed('QuoteRequest');
  const submit = typed('SubmitRequest');
  const gateway = new RequestSchemas(doc as unknown as OpenApiDocument);
  const envelope = {
    quote: gateway.compile({ method: 'post', path: '/tools/quote' }).body!,
    submit: gateway.compile({ method: 'post', path: '/tools/{tool}' }).body!,
  };
  const catalog = new Catalog({ enableTestTools: true });
  const examples = [...catalog.tools.values()].flatMap((t) =>
    [t.example, ...t.models.map((m) => m.example)].map((args) => ({ tool: t.name, arguments: args })),
  );
  const paid = (body: Json) => ({ ...body, priceVersion: '2026-11-26.1', maximumChargeMicros: 1_000 });

  it('accept every catalog example, as the gateway does', () => {
    expect(examples.length).toBeGreaterThan(15);
    for (const body of examples) {
      expect({ body, quote: quote(body), errors: quote.errors }).toEqual({ body, quote: true, errors: null });
      expect({ body, submit: submit(paid(body)), errors: submit.errors }).toEqual({ body, submit: true, errors: null });
      expect(() => envelope.quote(body)).not.toThrow();
      expect(() => envelope.submit(paid(body))).not.toThrow();
    }
  });

  it("refuse what the tool's schema refuses, naming only that tool's arguments", () => {
    expect(quote({ tool: 'image.render', arguments: { txet: 'x' } })).toBe(false);
    const paths = (quote.errors ?? []).map((e) => e.instancePath);
    expect(paths.length).toBeGreaterThan(0);
    expect(paths.every((p) => p.startsWith('/arguments'))).toBe(true);
    expect(submit(paid({ tool: 'test.sleep', arguments: { seconds: 1, steps: 1 } }))).toBe(false);
    expect(quote({ tool: 'image.rendr', arguments: { text: 'x' } })).toBe(false);
    expect(quote.errors?.[0]?.keyword).toBe('discriminator');
  });

  it('leave the gateway checking the envelope only: the tool and its arguments stay the catalog’s (404 tool_not_found, 400 invalid_arguments)', () => {
    expect(() => envelope.quote({ tool: 'image.rendr', arguments: { text: 'x' } })).not.toThrow();
    expect(() => envelope.quote({ tool: 'image.render', arguments: { txet: 'x' } })).not.toThrow();
    expect(() => envelope.submit(paid({ tool: 'test.sleep', arguments: {} }))).not.toThrow();
    expect(() => envelope.quote({ tool: 'image.render', arguments: {}, extra: 1 })).toThrow('invalid_request');
  });
});
