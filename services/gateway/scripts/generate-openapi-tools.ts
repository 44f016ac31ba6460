import { readFile, writeFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { Catalog } from '@tes/catalog';

/**
 * Writes the tool-typed part of services/gateway/openapi.json from the catalog
 * (`npm run generate:openapi`): the request bodies of quote and submit, one variant per tool,
 * each with that tool's input schema as its `arguments`. The catalog owns those schemas;
 * the document only carries them, so they are never edited here by hand.
 * test/openapi-tools.test.ts fails when the committed document and the catalog disagree.
 *
 * Why request bodies (components.requestBodies) and not components.schemas: openapi-typescript
 * makes a property with a `default` required everywhere but in a request body, so `{ text }`
 * would miss `format`, `quality`, ... Why a discriminator without `mapping`: each variant's
 * `tool` is a `const`, which is all openapi-typescript and ajv's discriminator need (ajv refuses
 * `mapping`).
 *
 * The gateway does not check these: it checks the envelope the media type names in
 * `x-gateway-schema` (components.schemas.QuoteRequest, SubmitRequest), then the catalog checks
 * the tool and its arguments with its own answers (404 tool_not_found, tool_unavailable; 400
 * invalid_arguments), as before the document typed them.
 */

type Json = Record<string, unknown>;

/** What the generator reads of one tool: the same fields `GET /tools` serves. */
export interface ToolSource {
  name: string;
  description: string;
  inputSchema: Json;
  example: Json;
}

/** Every tool of the catalog, test tools included (the test stack offers them; the variant says so). */
export function catalogTools(): ToolSource[] {
  return [...new Catalog({ enableTestTools: true }).tools.values()].map((t) => ({
    name: t.name,
    description: t.description,
    inputSchema: t.inputSchema,
    example: t.example,
  }));
}

const ENVELOPE = { quote: 'QuoteRequest', submit: 'SubmitRequest' } as const;
const INTRO = {
  quote: 'A tool and its arguments.',
  submit: "The quoted tool and arguments, with the quote's price version and maximum charge; `tool` must equal the `{tool}` path parameter.",
} as const;

function typedBody(doc: Json, kind: keyof typeof ENVELOPE, tools: readonly ToolSource[]): Json {
  const name = ENVELOPE[kind];
  const envelope = ((doc.components as Json).schemas as Json)[name] as Json | undefined;
  if (!envelope || typeof envelope.properties !== 'object') throw new Error(`openapi.json has no components.schemas.${name} to type`);
  const properties = envelope.properties as Json;
  const variants = tools.map((t) => ({
    title: t.name,
    description: `${t.description}${t.name.startsWith('test.') ? ' Offered only by a server started with ENABLE_TEST_TOOLS.' : ''}`,
    type: 'object',
    additionalProperties: false,
    required: envelope.required,
    properties: {
      ...structuredClone(properties),
      tool: { const: t.name },
      arguments: structuredClone(t.inputSchema),
    },
  }));
  const media: Json = {
    schema: { type: 'object', oneOf: variants, discriminator: { propertyName: 'tool' } },
    'x-gateway-schema': { $ref: `#/components/schemas/${name}` },
  };
  if (kind === 'quote' && tools[0]) media.example = { tool: tools[0].name, arguments: tools[0].example };
  return {
    description:
      `${INTRO[kind]} One variant per tool of the catalog, keyed by \`tool\`; \`arguments\` is that tool's \`inputSchema\` ` +
      '(`GET /tools/{tool}`), generated from the catalog. The gateway checks the body against `x-gateway-schema`, then the catalog checks the tool ' +
      'and its arguments: an unknown tool is `404 tool_not_found`, arguments its schema refuses `400 invalid_arguments`.',
    required: true,
    content: { 'application/json': media },
  };
}

/** The document with its tool-typed request bodies (re)written from `tools`; everything else as it was. */
export function withToolRequestBodies(doc: Json, tools: readonly ToolSource[]): Json {
  const out = structuredClone(doc);
  const components = out.components as Json;
  components.requestBodies = {
    ...(components.requestBodies as Json | undefined),
    QuoteRequest: typedBody(out, 'quote', tools),
    SubmitRequest: typedBody(out, 'submit', tools),
  };
  const paths = out.paths as Record<string, Record<string, Json>>;
  paths['/tools/quote']!.post!.requestBody = { $ref: '#/components/requestBodies/QuoteRequest' };
  paths['/tools/{tool}']!.post!.requestBody = { $ref: '#/components/requestBodies/SubmitRequest' };
  return out;
}

/** openapi.json's text as the generator writes it (JSON.stringify, two spaces, a final newline: the file's own layout). */
export function renderOpenApi(text: string, tools: readonly ToolSource[]): string {
  return `${JSON.stringify(withToolRequestBodies(JSON.parse(text) as Json, tools), null, 2)}\n`;
}

if (require.main === module) {
  const file = resolve(process.argv[2] ?? 'services/gateway/openapi.json');
  readFile(file, 'utf8')
    .then((text) => writeFile(file, renderOpenApi(text, catalogTools())))
    .then(
      () => process.stdout.write(`wrote ${file}\n`),
      (err: unknown) => {
        process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
        process.exitCode = 1;
      },
    );
}
