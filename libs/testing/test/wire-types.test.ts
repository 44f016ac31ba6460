import { join } from 'node:path';
import ts from 'typescript';
import { doc, type Obj } from './openapi-doc';
import { WIRE_TYPE_CHECKS } from './wire-types.check';

/**
 * The wire types libs/core owns (PublicExecution, the webhook event types) against their
 * machine-readable twin, services/gateway/openapi.json. wire-types.check.ts states them as types;
 * compiled here with the TypeScript compiler (jest only transpiles), it fails on a field added,
 * dropped or retyped on one side only. The built objects are validated against the schema itself
 * in openapi-validator.test.ts.
 */
it('PublicExecution, its progress and steps, and the webhook event types match the OpenAPI document', () => {
  const file = join(__dirname, 'wire-types.check.ts');
  const options: ts.CompilerOptions = {
    strict: true,
    noEmit: true,
    skipLibCheck: true,
    types: ['node'],
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.Node16,
  };
  const program = ts.createProgram([file], options);
  const problems = ts.getPreEmitDiagnostics(program).map((d) => {
    const where = d.file && d.start !== undefined ? `${d.file.fileName}:${d.file.getLineAndCharacterOfPosition(d.start).line + 1} ` : '';
    return `${where}${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`;
  });
  expect(problems).toEqual([]);
  expect(new Set(Object.values(WIRE_TYPE_CHECKS))).toEqual(new Set([true]));
}, 60_000);

it('the OpenAPI Execution schema requires every field it names (as PublicExecution does)', () => {
  const execution = ((doc.components as Obj).schemas as Record<string, { properties: Obj; required: string[] }>).Execution!;
  expect([...execution.required].sort()).toEqual(Object.keys(execution.properties).sort());
});
