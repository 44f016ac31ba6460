import { Validator } from '@cfworker/json-schema';

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type JsonObject = Record<string, Json>;

/** The slice of JSON Schema 2020-12 the tools' inputSchemas use. */
export interface Schema {
  type?: string | string[];
  description?: string;
  properties?: Record<string, Schema>;
  required?: string[];
  items?: Schema;
  enum?: Json[];
  const?: Json;
  default?: Json;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  exclusiveMaximum?: number;
  multipleOf?: number;
  minLength?: number;
  maxLength?: number;
  minItems?: number;
  maxItems?: number;
  pattern?: string;
  format?: string;
  oneOf?: Schema[];
  anyOf?: Schema[];
  allOf?: Schema[];
  not?: Schema;
}

/** Field errors by JSON pointer ('' is the whole input, '/slides/0/text' a slide's text). */
export type FieldErrors = ReadonlyMap<string, readonly string[]>;

/** A string field that takes an uploaded file's id (a file picker in the form). */
export function isFileField(schema: Schema): boolean {
  return schema.type === 'string' && (schema.pattern ?? '').includes('file_');
}

/** Checks the input against the tool's inputSchema in the browser, before anything is sent. */
export function validate(schema: Schema, value: JsonObject): FieldErrors {
  const result = new Validator(schema as object, '2020-12', false).validate(value);
  const errors = new Map<string, string[]>();
  const add = (pointer: string, message: string) => {
    const list = errors.get(pointer) ?? [];
    if (!list.includes(message)) list.push(message);
    errors.set(pointer, list);
  };
  for (const unit of result.errors) {
    // Wrappers repeat what their children say; a failing oneOf branch is explained by the oneOf.
    if (['properties', 'items', 'allOf', 'false', '$ref'].includes(unit.keyword)) continue;
    if (/\/(oneOf|anyOf)\/\d+\//.test(unit.keywordLocation)) continue;
    const at = unit.instanceLocation.replace(/^#/, '');
    const rule = at2(schema, unit.keywordLocation);
    const quoted = /"([^"]+)"/.exec(unit.error)?.[1] ?? '';
    switch (unit.keyword) {
      case 'required':
        add(`${at}/${escape(quoted)}`, 'Required.');
        break;
      case 'additionalProperties':
        add(`${at}/${escape(quoted)}`, 'Not an input of this tool.');
        break;
      case 'dependentRequired': {
        const needs = /does not have "([^"]+)"/.exec(unit.error)?.[1] ?? '';
        add(`${at}/${escape(quoted)}`, `Only allowed together with ${needs}.`);
        break;
      }
      case 'oneOf':
      case 'anyOf':
        add(at, alternatives(rule, valueAt(value, at)));
        break;
      default:
        add(at, describe(unit.keyword, rule, unit.error));
    }
  }
  return errors;
}

/** What a failed keyword asks for, in words, from the constraint's own value. */
function describe(keyword: string, rule: unknown, fallback: string): string {
  const n = typeof rule === 'number' ? rule : NaN;
  switch (keyword) {
    case 'minimum':
      return `At least ${n}.`;
    case 'maximum':
      return `At most ${n}.`;
    case 'exclusiveMinimum':
      return `More than ${n}.`;
    case 'exclusiveMaximum':
      return `Less than ${n}.`;
    case 'multipleOf':
      return n === 1 ? 'A whole number.' : `A multiple of ${n}.`;
    case 'minLength':
      return n === 1 ? 'Must not be empty.' : `At least ${n} characters.`;
    case 'maxLength':
      return `At most ${n} characters.`;
    case 'minItems':
      return `At least ${n} item${n === 1 ? '' : 's'}.`;
    case 'maxItems':
      return `At most ${n} items.`;
    case 'type':
      return `Must be ${rule === 'integer' ? 'a whole number' : `a ${String(rule)}`}.`;
    case 'enum':
      return `One of ${(rule as Json[]).map((v) => JSON.stringify(v)).join(', ')}.`;
    case 'pattern':
      return patternWords(String(rule));
    case 'not': {
      const p = (rule as Schema | undefined)?.pattern ?? '';
      if (/DOCTYPE/i.test(p)) return 'DOCTYPE and ENTITY declarations are not allowed.';
      if (p.includes('href')) return 'External references are not allowed (only #fragment and data: links).';
      return 'Contains something not allowed here.';
    }
    default:
      return fallback;
  }
}

function patternWords(pattern: string): string {
  if (pattern.includes('file_')) return 'Choose a file to upload (or give a file_… id).';
  if (pattern.includes('#') && pattern.includes('a-f')) return 'A colour like #1d3557.';
  if (pattern.includes('<svg')) return 'Must be an SVG document (<svg …>).';
  return `Must match ${pattern}.`;
}

/** oneOf over `required` branches: "give exactly one of svg or text". */
function alternatives(rule: unknown, value: Json | undefined): string {
  const names = Array.isArray(rule) ? (rule as Schema[]).flatMap((b) => b.required ?? []) : [];
  if (names.length === 0) return 'Does not match exactly one of the allowed forms.';
  const given = names.filter((n) => value !== null && typeof value === 'object' && !Array.isArray(value) && value[n] !== undefined);
  const list = names.map((n) => `“${n}”`).join(' or ');
  return given.length > 1 ? `Give only one of ${list}, not both.` : `Give one of ${list}.`;
}

/** The value at a JSON pointer of the schema ('#/properties/width/minimum'). */
function at2(root: Schema, keywordLocation: string): unknown {
  let node: unknown = root;
  for (const part of keywordLocation.replace(/^#\/?/, '').split('/')) {
    if (part === '') continue;
    const key = part.replace(/~1/g, '/').replace(/~0/g, '~');
    node = node !== null && typeof node === 'object' ? (node as Record<string, unknown>)[key] : undefined;
  }
  return node;
}

function valueAt(root: Json | undefined, pointer: string): Json | undefined {
  let node = root;
  for (const part of pointer.split('/').slice(1)) {
    const key = part.replace(/~1/g, '/').replace(/~0/g, '~');
    if (node === null || typeof node !== 'object') return undefined;
    node = Array.isArray(node) ? node[Number(key)] : node[key];
  }
  return node;
}

function escape(name: string): string {
  return name.replace(/~/g, '~0').replace(/\//g, '~1');
}

/** The server's ajv errors (details.errors of invalid_arguments) by pointer, like validate(). */
export function serverFieldErrors(details: Record<string, unknown> | undefined): FieldErrors {
  const errors = new Map<string, string[]>();
  const list = Array.isArray(details?.errors)
    ? (details.errors as { instancePath?: string; keyword?: string; message?: string; params?: Record<string, unknown> }[])
    : [];
  for (const e of list) {
    let at = e.instancePath ?? '';
    if (e.keyword === 'required' && typeof e.params?.missingProperty === 'string') at += `/${escape(e.params.missingProperty)}`;
    const message = e.message ? e.message.charAt(0).toUpperCase() + e.message.slice(1) + (e.message.endsWith('.') ? '' : '.') : 'Invalid.';
    errors.set(at, [...(errors.get(at) ?? []), message]);
  }
  return errors;
}
