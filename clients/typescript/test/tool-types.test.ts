import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import ts from 'typescript';
import { Catalog } from '@tes/catalog';
import { catalogTools, renderToolTypes } from '../scripts/generate-tool-types';

const ROOT = join(__dirname, '../../..');
const TOOL_TYPES = join(ROOT, 'clients/typescript/src/tool-types.ts');

/**
 * src/tool-types.ts is generated from the catalog's input schemas by `npm run
 * generate:tools` and committed (like src/schema.ts from openapi.json, test/schema.test.ts).
 * A change to a tool's schema or description without a regeneration fails here.
 */
it('src/tool-types.ts is what `npm run generate:tools` writes from the catalog', async () => {
  const pkg = JSON.parse(await readFile(join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
  expect(pkg.scripts['generate:tools']).toContain('clients/typescript/scripts/dist/generate-tool-types.js');
  const committed = await readFile(TOOL_TYPES, 'utf8');
  const fresh = renderToolTypes(catalogTools());
  if (committed !== fresh) {
    let at = 0;
    while (committed[at] === fresh[at]) at++;
    const line = committed.slice(0, at).split('\n').length;
    throw new Error(
      `clients/typescript/src/tool-types.ts disagrees with the catalog's input schemas (from line ${line} on): ` +
        'run `npm run generate:tools` at the repository root and commit the file',
    );
  }
});

type Json = Record<string, unknown>;

/**
 * The generated types against the catalog's own examples, compiled with the TypeScript
 * compiler: every example of a tool and of each of its models (valid against its schema,
 * a catalog test says) must compile as that tool's arguments, and the same example with an
 * unknown property or without a required one must not.
 */
it('every catalog example compiles as its tool arguments; with an unknown or a missing property it does not', () => {
  const catalog = new Catalog({ enableTestTools: true });
  const lines = [`import type { ToolArgumentsByName as A } from ${JSON.stringify(TOOL_TYPES.replace(/\.ts$/, ''))};`];
  let cases = 0;
  for (const tool of catalog.tools.values()) {
    const examples = [tool.example, ...tool.models.map((m) => m.example)] as Json[];
    const required = (tool.inputSchema.required as string[] | undefined) ?? [];
    for (const example of examples) {
      const type = `A[${JSON.stringify(tool.name)}]`;
      lines.push(`export const ok${cases}: ${type} = ${JSON.stringify(example)};`);
      lines.push(`// @ts-expect-error`, `export const extra${cases}: ${type} = ${JSON.stringify({ ...example, notAnArgument: 1 })};`);
      for (const name of required) {
        const { [name]: _dropped, ...rest } = example;
        lines.push(`// @ts-expect-error`, `export const missing${cases}_${name}: ${type} = ${JSON.stringify(rest)};`);
      }
      cases++;
    }
  }
  const file = join(ROOT, 'clients/typescript/test/__examples.ts');
  const options: ts.CompilerOptions = {
    strict: true,
    noEmit: true,
    skipLibCheck: true,
    types: [],
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.Node16,
  };
  const host = ts.createCompilerHost(options);
  const readFileOriginal = host.readFile.bind(host);
  host.readFile = (f) => (f === file ? lines.join('\n') : readFileOriginal(f));
  host.fileExists = (
    (exists) => (f: string) =>
      f === file || exists(f)
  )(host.fileExists.bind(host));
  const program = ts.createProgram([file], options, host);
  const problems = ts.getPreEmitDiagnostics(program).map((d) => {
    const where =
      d.file && d.start !== undefined
        ? `${d.file.fileName === file ? 'example' : d.file.fileName}:${d.file.getLineAndCharacterOfPosition(d.start).line + 1} `
        : '';
    return `${where}${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`;
  });
  expect(problems).toEqual([]);
  expect(cases).toBeGreaterThanOrEqual(catalog.tools.size * 2);
}, 60_000);
