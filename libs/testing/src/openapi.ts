import { readFileSync } from 'node:fs';
import path from 'node:path';
import Ajv2020, { type ErrorObject, type ValidateFunction } from 'ajv/dist/2020';
import addFormats from 'ajv-formats';

/**
 * Checks real HTTP responses against services/gateway/openapi.json, so the document and the
 * gateway cannot drift apart: integration tests call `assertValid` on every response they get.
 */

/** Path of the gateway's OpenAPI document, from src/ or dist/ alike. */
export const OPENAPI_PATH = path.resolve(__dirname, '../../../services/gateway/openapi.json');

export type OpenApiDocument = Record<string, unknown> & { openapi: string; paths: Record<string, Record<string, unknown>> };
export type ResponseHeaders = Record<string, string | string[] | number | undefined>;

export interface OpenApiValidatorOptions {
  /**
   * Response headers whose absence is not reported even when the document requires them
   * (case-insensitive names). For a feature the document describes before the code has it.
   */
  ignoreMissingHeaders?: readonly string[];
  /**
   * A request to a path the document does not list is answered
   * `components.responses.RouteNotFound` (404 route_not_found), and one with a method a
   * listed path does not take `components.responses.MethodNotAllowed` (405
   * method_not_allowed with Allow). By default such responses are accepted; with
   * `strictOperations: true` any undocumented operation is a problem.
   */
  strictOperations?: boolean;
}

/** Reads and parses services/gateway/openapi.json. */
export function loadOpenApi(file: string = OPENAPI_PATH): OpenApiDocument {
  return JSON.parse(readFileSync(file, 'utf8')) as OpenApiDocument;
}

const DOC_ID = 'https://openapi.invalid/openapi.json';

interface Operation {
  template: string;
  method: string;
  pointer: string;
  operation: Record<string, unknown>;
}

interface Template {
  template: string;
  segments: string[];
  /** Number of literal (non-parameter) segments: more literal segments win. */
  literals: number;
}

interface ResolvedResponse {
  pointer: string;
  response: Record<string, unknown>;
}

/** JSON Pointer escaping of one reference token (RFC 6901). */
export function escapePointer(token: string): string {
  return token.replace(/~/g, '~0').replace(/\//g, '~1');
}

function unescapePointer(token: string): string {
  return token.replace(/~1/g, '/').replace(/~0/g, '~');
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

export class OpenApiValidator {
  readonly document: OpenApiDocument;
  private readonly ajv: Ajv2020;
  private readonly validators = new Map<string, ValidateFunction>();
  private readonly templates: Template[];
  private readonly ignoreMissing: Set<string>;
  private readonly strictOperations: boolean;

  constructor(document: OpenApiDocument, options: OpenApiValidatorOptions = {}) {
    this.document = document;
    this.ignoreMissing = new Set((options.ignoreMissingHeaders ?? []).map((h) => h.toLowerCase()));
    this.strictOperations = options.strictOperations ?? false;
    this.ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: true });
    addFormats(this.ajv);
    // The whole document is one schema resource; every schema is compiled as a $ref into it,
    // so `#/components/...` references resolve against the document itself.
    this.ajv.addSchema({ ...structuredClone(document), $id: DOC_ID });
    this.templates = Object.keys(document.paths ?? {}).map((template) => {
      const segments = splitPath(template);
      return { template, segments, literals: segments.filter((s) => !isParam(s)).length };
    });
  }

  /** Follows a `#/...` JSON pointer in the document. */
  resolvePointer(pointer: string): unknown {
    if (!pointer.startsWith('#')) throw new Error(`only local references are supported: ${pointer}`);
    const tokens = pointer.slice(1).split('/').slice(1).map(unescapePointer);
    let node: unknown = this.document;
    for (const token of tokens) {
      if (!isObject(node) && !Array.isArray(node)) return undefined;
      node = (node as Record<string, unknown>)[token];
      if (node === undefined) return undefined;
    }
    return node;
  }

  /** The object at `pointer` with any chain of `$ref`s followed; also returns where it lives. */
  private deref(pointer: string): { pointer: string; value: Record<string, unknown> } | undefined {
    let current = pointer;
    for (let i = 0; i < 20; i++) {
      const value = this.resolvePointer(current);
      if (!isObject(value)) return undefined;
      if (typeof value.$ref !== 'string') return { pointer: current, value };
      current = value.$ref;
    }
    throw new Error(`$ref cycle at ${pointer}`);
  }

  /** Finds the documented operation for a concrete method and path (query string allowed). */
  findOperation(method: string, rawPath: string): Operation | undefined {
    const m = method.toLowerCase();
    const segments = splitPath(stripQuery(rawPath));
    const candidates = this.templates
      .filter((t) => matches(t.segments, segments))
      // Concrete paths win over templated ones (OpenAPI 3.1 "Path Templating Matching").
      .sort((a, b) => b.literals - a.literals);
    // As in the router, a concrete path without this method falls through to a templated
    // path that has it (POST /tools/executions reaches POST /tools/{tool}).
    for (const t of candidates) {
      const item = this.document.paths[t.template];
      const operation = isObject(item) ? item[m] : undefined;
      if (isObject(operation)) {
        return { template: t.template, method: m, pointer: `#/paths/${escapePointer(t.template)}/${m}`, operation };
      }
    }
    return undefined;
  }

  /**
   * Problems of one received response against the document; empty when it conforms.
   * `path` is the request path as sent (a query string is ignored).
   */
  validate(method: string, rawPath: string, status: number, headers: ResponseHeaders, body: unknown): string[] {
    const where = `${method.toUpperCase()} ${stripQuery(rawPath)} → ${status}`;
    const op = this.findOperation(method, rawPath);
    let resolved: ResolvedResponse | undefined;
    if (!op) {
      const known = this.templates.some((t) => matches(t.segments, splitPath(stripQuery(rawPath))));
      const fallback = this.deref(known ? '#/components/responses/MethodNotAllowed' : '#/components/responses/RouteNotFound');
      const what = known ? `method ${method.toUpperCase()} is not documented for this path` : 'no path template of the document matches';
      if (this.strictOperations || !fallback) return [`${where}: ${what}`];
      const expected = known ? 405 : 404;
      if (status !== expected) return [`${where}: ${what} (it may only answer ${known ? '405 method_not_allowed' : '404 route_not_found'})`];
      resolved = { pointer: fallback.pointer, response: fallback.value };
    } else {
      const responses = this.deref(`${op.pointer}/responses`);
      if (!responses) return [`${where}: the operation has no responses`];
      const key = [String(status), `${String(status)[0]}XX`, 'default'].find((k) => k in responses.value);
      if (!key) {
        return [
          `${where}: status ${status} is not documented for ${op.method.toUpperCase()} ${op.template} (documented: ${Object.keys(responses.value).join(', ')})`,
        ];
      }
      const r = this.deref(`${responses.pointer}/${escapePointer(key)}`);
      if (!r) return [`${where}: response ${key} does not resolve`];
      resolved = { pointer: r.pointer, response: r.value };
    }
    return [...this.checkHeaders(where, resolved, headers), ...this.checkBody(where, resolved, headers, body)];
  }

  /** Like `validate`, but throws an Error listing every problem. */
  assertValid(method: string, rawPath: string, status: number, headers: ResponseHeaders, body: unknown): void {
    const problems = this.validate(method, rawPath, status, headers, body);
    if (problems.length > 0) {
      throw new Error(`response does not match openapi.json:\n  - ${problems.join('\n  - ')}\nbody: ${truncate(JSON.stringify(body))}`);
    }
  }

  /** Compiles (once) the schema at a `#/...` pointer of the document. */
  schemaValidator(pointer: string): ValidateFunction {
    let v = this.validators.get(pointer);
    if (!v) {
      v = this.ajv.compile({ $ref: `${DOC_ID}${pointer}` });
      this.validators.set(pointer, v);
    }
    return v;
  }

  private checkHeaders(where: string, resolved: ResolvedResponse, headers: ResponseHeaders): string[] {
    const problems: string[] = [];
    const received = new Map<string, string>();
    for (const [name, value] of Object.entries(headers ?? {})) {
      if (value === undefined) continue;
      received.set(name.toLowerCase(), Array.isArray(value) ? value.join(', ') : String(value));
    }
    const documented = isObject(resolved.response.headers) ? resolved.response.headers : {};
    for (const name of Object.keys(documented)) {
      // OpenAPI: a response header named Content-Type is ignored (the media type rules).
      if (name.toLowerCase() === 'content-type') continue;
      const header = this.deref(`${resolved.pointer}/headers/${escapePointer(name)}`);
      if (!header) {
        problems.push(`${where}: header ${name} does not resolve in the document`);
        continue;
      }
      const value = received.get(name.toLowerCase());
      if (value === undefined) {
        if (header.value.required === true && !this.ignoreMissing.has(name.toLowerCase())) {
          problems.push(`${where}: required response header ${name} is missing`);
        }
        continue;
      }
      if (isObject(header.value.schema)) {
        const validate = this.tryCompile(`${header.pointer}/schema`, problems, where);
        if (!validate) continue;
        const schema = this.deref(`${header.pointer}/schema`)?.value ?? {};
        if (!validate(coerceHeader(value, schema))) {
          problems.push(`${where}: header ${name}: ${JSON.stringify(value)} ${formatErrors(validate.errors)}`);
        }
      }
    }
    return problems;
  }

  private checkBody(where: string, resolved: ResolvedResponse, headers: ResponseHeaders, body: unknown): string[] {
    const content = resolved.response.content;
    if (!isObject(content) || Object.keys(content).length === 0) {
      const empty = body === undefined || body === null || body === '' || (isObject(body) && Object.keys(body).length === 0);
      return empty ? [] : [`${where}: the document describes no body, but one was received`];
    }
    const problems: string[] = [];
    const contentType = headerValue(headers, 'content-type');
    const mediaTypes = Object.keys(content);
    const mediaType = contentType === undefined ? undefined : mediaTypes.find((mt) => mediaTypeMatches(mt, contentType));
    if (contentType === undefined) {
      problems.push(`${where}: Content-Type is missing (documented: ${mediaTypes.join(', ')})`);
    } else if (!mediaType) {
      problems.push(`${where}: Content-Type ${contentType} is not documented (documented: ${mediaTypes.join(', ')})`);
    }
    const chosen = mediaType ?? mediaTypes[0]!;
    const media = content[chosen];
    if (!isObject(media) || !('schema' in media)) return problems;
    const validate = this.tryCompile(`${resolved.pointer}/content/${escapePointer(chosen)}/schema`, problems, where);
    if (validate && !validate(body)) problems.push(`${where}: body ${formatErrors(validate.errors)}`);
    return problems;
  }

  /** A broken document is reported as a problem of the response rather than thrown. */
  private tryCompile(pointer: string, problems: string[], where: string): ValidateFunction | undefined {
    try {
      return this.schemaValidator(pointer);
    } catch (err) {
      problems.push(`${where}: the schema at ${pointer} does not compile: ${(err as Error).message}`);
      return undefined;
    }
  }
}

function stripQuery(p: string): string {
  const i = p.search(/[?#]/);
  return i === -1 ? p : p.slice(0, i);
}

function splitPath(p: string): string[] {
  return p.split('/').filter((s) => s !== '');
}

function isParam(segment: string): boolean {
  return /^\{[^}]+\}$/.test(segment);
}

function matches(template: string[], actual: string[]): boolean {
  return template.length === actual.length && template.every((t, i) => isParam(t) || t === actual[i]);
}

function headerValue(headers: ResponseHeaders, name: string): string | undefined {
  for (const [k, v] of Object.entries(headers ?? {})) {
    if (k.toLowerCase() === name && v !== undefined) return Array.isArray(v) ? v.join(', ') : String(v);
  }
  return undefined;
}

function mediaTypeMatches(documented: string, received: string): boolean {
  const essence = received.split(';')[0]!.trim().toLowerCase();
  const doc = documented.toLowerCase();
  if (doc === '*/*' || doc === essence) return true;
  return doc.endsWith('/*') && essence.startsWith(doc.slice(0, -1));
}

/** Header values are strings; an integer/number/boolean schema describes the parsed value. */
function coerceHeader(value: string, schema: Record<string, unknown>): unknown {
  const types = Array.isArray(schema.type) ? schema.type : [schema.type];
  if ((types.includes('integer') || types.includes('number')) && /^-?[0-9]+(\.[0-9]+)?$/.test(value.trim())) return Number(value);
  if (types.includes('boolean') && (value === 'true' || value === 'false')) return value === 'true';
  return value;
}

function formatErrors(errors: ErrorObject[] | null | undefined): string {
  return (errors ?? [])
    .slice(0, 10)
    .map(
      (e) =>
        `${e.instancePath || '/'} ${e.message ?? e.keyword}${e.keyword === 'enum' || e.keyword === 'additionalProperties' ? ` ${JSON.stringify(e.params)}` : ''}`,
    )
    .join('; ');
}

function truncate(s: string | undefined, max = 2000): string {
  if (s === undefined) return 'undefined';
  return s.length > max ? `${s.slice(0, max)}…` : s;
}
