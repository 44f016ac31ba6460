import { writeFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { Catalog } from '@tes/catalog';

/**
 * Writes clients/typescript/src/tool-types.ts, a TypeScript type per tool, from the catalog's input
 * schemas (`npm run generate:tools`). test/tool-types.test.ts fails when the file is stale.
 *
 * Our own small renderer rather than json-schema-to-typescript: that package renders the
 * catalog's `oneOf: [{ required: ['svg'] }, { required: ['text'] }]` (exactly one of two
 * properties) as an intersection with `{ [k: string]: unknown }`, which accepts any property
 * name, so `{ txet: 42 }` would compile; and it expands `maxItems: 20` into tuples. The
 * catalog uses a small part of JSON Schema; this renders that part exactly (an exclusive
 * `oneOf` as a union whose members forbid the other's property with `?: never`) and throws on
 * any keyword it does not know, so a new kind of schema cannot turn into a loose type unseen.
 */

type Schema = Record<string, unknown>;

/** What the generator reads of one tool: the same fields `GET /tools` serves. */
export interface ToolSchemaSource {
  name: string;
  description: string;
  inputSchema: Schema;
}

/** Keywords that only document a value: shown in the doc comment, absent from the type. */
const ANNOTATIONS = new Set(['description', 'default', 'title', 'examples', '$comment']);
/** Keywords that restrict a value within its type (a pattern, a bound): the server checks them. */
const VALUE_CONSTRAINTS = new Set([
  'minLength',
  'maxLength',
  'pattern',
  'format',
  'minimum',
  'maximum',
  'exclusiveMinimum',
  'exclusiveMaximum',
  'multipleOf',
  'minItems',
  'maxItems',
  'uniqueItems',
]);
const STRUCTURE = new Set([
  'type',
  'enum',
  'const',
  'properties',
  'required',
  'additionalProperties',
  'items',
  'oneOf',
  'if',
  'then',
  'else',
  'dependentRequired',
]);
/** Bounds shown as doc tags, in this order. */
const DOC_TAGS = [
  'default',
  'minimum',
  'exclusiveMinimum',
  'maximum',
  'exclusiveMaximum',
  'multipleOf',
  'minLength',
  'maxLength',
  'minItems',
  'maxItems',
  'pattern',
  'format',
];

function isSchema(v: unknown): v is Schema {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function fail(path: string, message: string): never {
  throw new Error(`generate-tool-types: ${path}: ${message}; teach clients/typescript/scripts/generate-tool-types.ts to render it`);
}

/** A subschema of allOf/not that only narrows a value within its type (string patterns, say). */
function onlyConstrainsValue(s: unknown, path: string): boolean {
  if (!isSchema(s)) return false;
  return Object.entries(s).every(([k, v]) => {
    if (ANNOTATIONS.has(k) || VALUE_CONSTRAINTS.has(k)) return true;
    if (k === 'not') return onlyConstrainsValue(v, `${path}/not`);
    if (k === 'allOf') return Array.isArray(v) && v.every((x, i) => onlyConstrainsValue(x, `${path}/allOf/${i}`));
    return false;
  });
}

function checkKeywords(s: Schema, path: string): void {
  for (const [k, v] of Object.entries(s)) {
    if (ANNOTATIONS.has(k) || VALUE_CONSTRAINTS.has(k) || STRUCTURE.has(k)) continue;
    if ((k === 'allOf' || k === 'not') && onlyConstrainsValue({ [k]: v }, path)) continue;
    fail(path, `keyword ${k}`);
  }
}

function literal(v: unknown, path: string): string {
  if (typeof v === 'string') return `'${v.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;
  if (typeof v === 'number' || typeof v === 'boolean' || v === null) return String(v);
  return fail(path, `a non-primitive enum or const value`);
}

function docComment(s: Schema, indent: string): string {
  const lines: string[] = [];
  if (typeof s.description === 'string') lines.push(...s.description.split('\n'));
  for (const tag of DOC_TAGS) if (s[tag] !== undefined) lines.push(`@${tag} ${typeof s[tag] === 'string' ? s[tag] : JSON.stringify(s[tag])}`);
  if (lines.length === 0) return '';
  const safe = lines.map((l) => l.replace(/\*\//g, '*\\/'));
  if (safe.length === 1) return `${indent}/** ${safe[0]} */\n`;
  return `${indent}/**\n${safe.map((l) => `${indent} * ${l}`.trimEnd()).join('\n')}\n${indent} */\n`;
}

/** One property of one member of an object's union. */
interface Property {
  schema: Schema;
  required: boolean;
  /** Forbidden in this member (the other side of an exclusive oneOf). */
  never: boolean;
}
type Variant = Map<string, Property>;

function cloneVariant(v: Variant): Variant {
  return new Map([...v].map(([k, p]) => [k, { ...p }]));
}

/** `oneOf: [{ required: [a] }, { required: [b] }]`: exactly one of the groups is present. */
function applyOneOf(variants: Variant[], oneOf: unknown, path: string): Variant[] {
  if (!Array.isArray(oneOf)) return fail(path, 'oneOf that is not an array');
  const groups = oneOf.map((branch, i): string[] => {
    const p = `${path}/oneOf/${i}`;
    if (!isSchema(branch) || Object.keys(branch).some((k) => k !== 'required') || !Array.isArray(branch.required)) {
      return fail(p, 'a oneOf branch other than { required: [...] }');
    }
    return branch.required.map(String);
  });
  return variants.flatMap((base) =>
    groups.map((group) => {
      const v = cloneVariant(base);
      for (const name of group) {
        const prop = v.get(name) ?? fail(path, `oneOf requires ${name}, which is not a property`);
        prop.required = true;
      }
      // Another group's property present too would match two branches: oneOf refuses that.
      for (const other of groups) for (const name of other) if (!group.includes(name)) v.get(name)!.never = true;
      return v;
    }),
  );
}

/**
 * `if: { required: [p], properties: { p: { const: c } } }, then: {...}, else: {...}`: two
 * members, one where p is c (then's property schemas apply) and one where p is absent or
 * another value of its enum (else's apply).
 */
function applyIf(variants: Variant[], s: Schema, path: string): Variant[] {
  const cond = s.if;
  const props = isSchema(cond) ? cond.properties : undefined;
  const names = isSchema(props) ? Object.keys(props) : [];
  const name = names[0] ?? '';
  const test = isSchema(props) ? props[name] : undefined;
  if (
    !isSchema(cond) ||
    names.length !== 1 ||
    !isSchema(test) ||
    !('const' in test) ||
    Object.keys(test).length !== 1 ||
    JSON.stringify(cond.required) !== JSON.stringify([name]) ||
    Object.keys(cond).some((k) => k !== 'required' && k !== 'properties')
  ) {
    return fail(`${path}/if`, 'an if other than { required: [p], properties: { p: { const: c } } }');
  }
  const overrides = (branch: unknown, p: string): Record<string, Schema> => {
    if (branch === undefined) return {};
    if (!isSchema(branch) || Object.keys(branch).some((k) => k !== 'properties') || !isSchema(branch.properties)) {
      return fail(p, 'a then/else other than { properties: {...} }');
    }
    return branch.properties as Record<string, Schema>;
  };
  const thenProps = overrides(s.then, `${path}/then`);
  const elseProps = overrides(s.else, `${path}/else`);
  return variants.flatMap((base) => {
    const prop = base.get(name) ?? fail(`${path}/if`, `${name} is not a property`);
    const values = Array.isArray(prop.schema.enum) ? (prop.schema.enum as unknown[]) : undefined;
    if (!values) return fail(`${path}/if`, `${name} has no enum to split`);
    const { enum: _values, ...rest } = prop.schema;
    const yes = cloneVariant(base);
    yes.set(name, { schema: { ...rest, const: test.const }, required: true, never: false });
    for (const [k, o] of Object.entries(thenProps))
      yes.set(k, { ...(yes.get(k) ?? fail(`${path}/then`, `${k} is not a property`)), schema: { ...yes.get(k)!.schema, ...o } });
    const no = cloneVariant(base);
    no.set(name, { schema: { ...rest, enum: values.filter((x) => x !== test.const) }, required: prop.required, never: false });
    for (const [k, o] of Object.entries(elseProps))
      no.set(k, { ...(no.get(k) ?? fail(`${path}/else`, `${k} is not a property`)), schema: { ...no.get(k)!.schema, ...o } });
    return [yes, no];
  });
}

/** `dependentRequired: { color: ['text'] }`: color is forbidden where text is. */
function applyDependentRequired(variants: Variant[], deps: unknown, path: string): void {
  if (!isSchema(deps)) return fail(path, 'dependentRequired that is not an object');
  for (const v of variants) {
    for (const [key, needs] of Object.entries(deps)) {
      if (!Array.isArray(needs)) return fail(path, `dependentRequired.${key} that is not an array`);
      const prop = v.get(key) ?? fail(path, `dependentRequired names ${key}, which is not a property`);
      if (needs.some((n) => v.get(String(n))?.never === true)) prop.never = true;
    }
  }
}

function objectType(s: Schema, path: string, indent: string): string {
  const properties = isSchema(s.properties) ? s.properties : {};
  const required = Array.isArray(s.required) ? s.required.map(String) : [];
  const base: Variant = new Map();
  for (const [name, prop] of Object.entries(properties)) {
    if (!isSchema(prop)) fail(`${path}/properties/${name}`, 'a property schema that is not an object');
    base.set(name, { schema: prop, required: required.includes(name), never: false });
  }
  for (const name of required) if (!base.has(name)) fail(path, `required ${name}, which is not a property`);
  let variants = [base];
  if (s.oneOf !== undefined) variants = applyOneOf(variants, s.oneOf, path);
  if (s.if !== undefined) variants = applyIf(variants, s, path);
  else if (s.then !== undefined || s.else !== undefined) fail(path, 'then/else without if');
  if (s.dependentRequired !== undefined) applyDependentRequired(variants, s.dependentRequired, path);
  const open = s.additionalProperties !== false;
  if (open && s.additionalProperties !== undefined && s.additionalProperties !== true) fail(path, 'additionalProperties with a schema');
  const inner = `${indent}  `;
  const render = (v: Variant): string => {
    const members = [...v].map(([name, p]) => {
      const key = /^[A-Za-z_$][\w$]*$/.test(name) ? name : literal(name, path);
      if (p.never) return `${inner}${key}?: never;\n`;
      return `${docComment(p.schema, inner)}${inner}${key}${p.required ? '' : '?'}: ${schemaType(p.schema, `${path}/properties/${name}`, inner)};\n`;
    });
    if (open) members.push(`${inner}[key: string]: unknown;\n`);
    return members.length === 0 ? 'Record<string, never>' : `{\n${members.join('')}${indent}}`;
  };
  return variants.map(render).join(' | ');
}

function primitive(type: unknown, s: Schema, path: string, indent: string): string {
  switch (type) {
    case 'string':
      return 'string';
    case 'number':
    case 'integer':
      return 'number';
    case 'boolean':
      return 'boolean';
    case 'null':
      return 'null';
    case 'array': {
      if (s.items === undefined) return 'unknown[]';
      if (!isSchema(s.items)) return fail(path, 'items that is not one schema');
      const item = schemaType(s.items, `${path}/items`, indent);
      return /^[\w']+$/.test(item) ? `${item}[]` : `(${item})[]`;
    }
    case 'object':
      return objectType(s, path, indent);
    default:
      return fail(path, `type ${JSON.stringify(type)}`);
  }
}

/** The TypeScript type of the values a schema admits (within what a type can say). */
function schemaType(s: Schema, path: string, indent: string): string {
  checkKeywords(s, path);
  if ('const' in s) return literal(s.const, `${path}/const`);
  if (Array.isArray(s.enum)) return s.enum.map((v, i) => literal(v, `${path}/enum/${i}`)).join(' | ');
  if (s.type === undefined) return s.properties !== undefined ? objectType(s, path, indent) : 'unknown';
  const types = Array.isArray(s.type) ? s.type : [s.type];
  return types.map((t) => primitive(t, s, path, indent)).join(' | ');
}

/** 'image.render' -> 'ImageRenderArguments'. */
function typeName(tool: string): string {
  return `${tool
    .split(/[^A-Za-z0-9]+/)
    .filter(Boolean)
    .map((w) => w[0]!.toUpperCase() + w.slice(1))
    .join('')}Arguments`;
}

const HEADER = `/* eslint-disable @typescript-eslint/consistent-type-definitions -- type aliases: unlike an interface, they are assignable to Record<string, unknown> */
/**
 * Tool arguments by tool name. GENERATED by \`npm run generate:tools\` from the input schemas
 * of the catalog (libs/catalog; the \`inputSchema\` of each tool in \`GET /tools\`): do not edit.
 * clients/typescript/test/tool-types.test.ts fails when this file and the catalog disagree.
 *
 * A type says which properties a tool takes, which are required, their types and their
 * allowed values; the server still checks what a type cannot say (patterns, bounds, a sum
 * of durations) and answers 400 invalid_arguments. Properties with a default may be left out.
 */
`;

/** The source of tool-types.ts for these tools. */
export function renderToolTypes(tools: readonly ToolSchemaSource[]): string {
  const names = new Set<string>();
  const blocks = tools.map((t) => {
    const name = typeName(t.name);
    if (names.has(name)) fail(t.name, `a second tool named ${name}`);
    names.add(name);
    const test = t.name.startsWith('test.') ? ' Offered only by a server started with ENABLE_TEST_TOOLS.' : '';
    return `${docComment({ description: `${t.name}: ${t.description}${test}` }, '')}export type ${name} = ${schemaType(t.inputSchema, t.name, '')};\n`;
  });
  const map = tools.map((t) => `  '${t.name}': ${typeName(t.name)};\n`).join('');
  return (
    `${HEADER}\n${blocks.join('\n')}\n` +
    `/** The arguments of each tool these types know, by tool name. */\nexport interface ToolArgumentsByName {\n${map}}\n\n` +
    `/** The name of a tool these types know. */\nexport type ToolName = keyof ToolArgumentsByName;\n`
  );
}

/** Every tool of the catalog, test tools included (the test stack offers them). */
export function catalogTools(): ToolSchemaSource[] {
  return [...new Catalog({ enableTestTools: true }).tools.values()].map((t) => ({ name: t.name, description: t.description, inputSchema: t.inputSchema }));
}

if (require.main === module) {
  const out = resolve(process.argv[2] ?? 'clients/typescript/src/tool-types.ts');
  writeFile(out, renderToolTypes(catalogTools())).then(
    () => process.stdout.write(`wrote ${out}\n`),
    (err: unknown) => {
      process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
      process.exitCode = 1;
    },
  );
}
