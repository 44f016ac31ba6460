import Ajv2020, { type ValidateFunction } from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import { AppError } from '@tes/core';
import type { RouteKey } from './route-table';

/** openapi.json, parsed: the parts read here. */
export interface OpenApiDocument {
  security?: unknown[];
  paths: Record<string, Record<string, unknown>>;
  components?: Record<string, unknown>;
}

/** Throws invalid_request with ajv's errors unless `value` conforms; returns it typed. */
export type Check<T> = (value: unknown) => T;

/** What the document declares for one operation, with its request schemas compiled. */
export interface CompiledOperation {
  operationId: string;
  /** x-required-scope, or undefined for an operation with `security: []`. */
  requiredScope: string | undefined;
  /** The application/json request body's schema, if the operation declares a body. */
  body: Check<unknown> | undefined;
  /**
   * The query, if the operation declares query parameters: only those, each against its
   * schema. Query values are strings; an integer parameter takes its canonical decimal form
   * only ('7', not '07', '7.0' or ' 7'), then its schema's bounds apply.
   */
  query: Check<unknown> | undefined;
  /** Whether a header value conforms to the operation's header parameter `name`. */
  headerConforms(name: string, value: string): boolean;
}

/** Base URI the document is registered under, so `#/components/...` references resolve inside it. */
const DOC_ID = 'https://tes.invalid/openapi.json';

interface Parameter {
  name: string;
  in: string;
  required?: boolean;
  pointer: string;
}

/**
 * The request schemas of openapi.json, compiled once at start with ajv (draft 2020-12, strict,
 * no type coercion). The document is the one place a request's shape is declared; the
 * routes name their operation by method and path.
 */
export class RequestSchemas {
  private readonly ajv = new Ajv2020({ allErrors: true, strict: true, coerceTypes: false });

  constructor(private readonly document: OpenApiDocument) {
    addFormats(this.ajv);
    // One schema resource holding the document's paths and components, so `#/components/...`
    // references resolve inside it. ajv compiles a resource's root, and strict mode refuses
    // keywords it does not know: the two members are declared to it as annotations (their
    // contents are compiled only where a request schema references them, never the responses).
    this.ajv.addVocabulary(['paths', 'components']);
    this.ajv.addSchema({ $id: DOC_ID, paths: structuredClone(document.paths), components: structuredClone(document.components ?? {}) });
  }

  /** The operation at `route`'s method and path, compiled; throws if the document has none. */
  compile(route: RouteKey): CompiledOperation {
    const at = `#/paths/${escapePointer(route.path)}/${route.method}`;
    const operation = this.resolve(at);
    if (!isObject(operation)) throw new Error(`openapi.json has no operation ${route.method.toUpperCase()} ${route.path}`);
    const security = (operation.security ?? this.document.security) as unknown[] | undefined;
    const scope = operation['x-required-scope'];
    const params = this.parameters(at, operation);
    const query = params.filter((p) => p.in === 'query');
    const headers = new Map(params.filter((p) => p.in === 'header').map((p) => [p.name.toLowerCase(), p.pointer]));
    const headerChecks = new Map<string, ValidateFunction>();
    return {
      operationId: String(operation.operationId),
      requiredScope: security && security.length > 0 ? String(scope) : undefined,
      body: this.bodyCheck(at, operation),
      query: query.length > 0 ? this.queryCheck(query) : undefined,
      headerConforms: (name, value) => {
        const pointer = headers.get(name.toLowerCase());
        if (pointer === undefined) throw new Error(`${at} declares no header ${name}`);
        let check = headerChecks.get(pointer);
        if (!check) headerChecks.set(pointer, (check = this.validator(`${pointer}/schema`)));
        return check(value);
      },
    };
  }

  /**
   * The body's check: its application/json schema, or the schema its `x-gateway-schema` names
   * when it has one. Quote's and submit's schemas are typed per tool for callers (generated from
   * the catalog); the gateway checks only their envelope, and the catalog the tool and its
   * arguments, with its own answers (404 tool_not_found, 400 invalid_arguments).
   */
  private bodyCheck(at: string, operation: Record<string, unknown>): Check<unknown> | undefined {
    if (operation.requestBody === undefined) return undefined;
    const body = this.deref(`${at}/requestBody`);
    const media = isObject(body.value.content) ? body.value.content['application/json'] : undefined;
    if (!isObject(media) || media.schema === undefined) throw new Error(`${at}: the request body has no application/json schema`);
    const checked = media['x-gateway-schema'] === undefined ? 'schema' : 'x-gateway-schema';
    return checkWith(this.validator(`${body.pointer}/content/application~1json/${checked}`));
  }

  private queryCheck(params: Parameter[]): Check<unknown> {
    const integers = new Set(params.filter((p) => this.deref(`${p.pointer}/schema`).value.type === 'integer').map((p) => p.name));
    const validate = this.ajv.compile({
      type: 'object',
      additionalProperties: false,
      required: params.filter((p) => p.required === true).map((p) => p.name),
      properties: Object.fromEntries(params.map((p) => [p.name, { $ref: `${DOC_ID}${p.pointer}/schema` }])),
    });
    const check = checkWith(validate);
    return (value) => {
      // a copy with own properties only (the parsed query has no prototype; `__proto__` is a name like any other)
      const query: Record<string, unknown> = { ...(value as Record<string, unknown>) };
      for (const name of integers) {
        const v = query[name];
        if (typeof v === 'string' && /^-?(0|[1-9][0-9]*)$/.test(v)) query[name] = Number(v);
      }
      return check(query);
    };
  }

  /** The operation's parameters (path-level ones included), each at the pointer of its definition. */
  private parameters(at: string, operation: Record<string, unknown>): Parameter[] {
    const pathItem = at.slice(0, at.lastIndexOf('/'));
    const lists: [string, unknown][] = [
      [`${pathItem}/parameters`, this.resolve(`${pathItem}/parameters`)],
      [`${at}/parameters`, operation.parameters],
    ];
    const byKey = new Map<string, Parameter>();
    for (const [pointer, list] of lists) {
      if (!Array.isArray(list)) continue;
      list.forEach((_, i) => {
        const p = this.deref(`${pointer}/${i}`);
        const param = { name: String(p.value.name), in: String(p.value.in), required: p.value.required === true, pointer: p.pointer };
        byKey.set(`${param.in}:${param.name}`, param); // an operation's own parameter overrides the path item's
      });
    }
    return [...byKey.values()];
  }

  private validator(pointer: string): ValidateFunction {
    return this.ajv.compile({ $ref: `${DOC_ID}${pointer}` });
  }

  private resolve(pointer: string): unknown {
    let node: unknown = this.document;
    for (const token of pointer.slice(2).split('/').map(unescapePointer)) {
      if (!isObject(node) && !Array.isArray(node)) return undefined;
      node = (node as Record<string, unknown>)[token];
    }
    return node;
  }

  /** The object at `pointer` with any chain of `$ref`s followed, and where it lives. */
  private deref(pointer: string): { pointer: string; value: Record<string, unknown> } {
    let current = pointer;
    for (let i = 0; i < 20; i++) {
      const value = this.resolve(current);
      if (!isObject(value)) throw new Error(`openapi.json: ${current} is not an object`);
      if (typeof value.$ref !== 'string') return { pointer: current, value };
      current = value.$ref;
    }
    throw new Error(`openapi.json: $ref cycle at ${pointer}`);
  }
}

/** ajv's errors as the API reports them: details.errors, at most 20. */
function checkWith<T>(validate: ValidateFunction): Check<T> {
  return (value: unknown): T => {
    if (!validate(value)) {
      throw new AppError('invalid_request', 'invalid_request', {
        details: {
          errors: (validate.errors ?? [])
            .slice(0, 20)
            .map((e) => ({ instancePath: e.instancePath, keyword: e.keyword, message: e.message ?? e.keyword, params: e.params })),
        },
      });
    }
    return value as T;
  };
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function escapePointer(token: string): string {
  return token.replace(/~/g, '~0').replace(/\//g, '~1');
}

function unescapePointer(token: string): string {
  return token.replace(/~1/g, '/').replace(/~0/g, '~');
}
