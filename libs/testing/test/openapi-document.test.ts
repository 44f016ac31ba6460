import Ajv2020 from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import { ERROR_CODES, WEBHOOK_EVENTS, type ErrorCode } from '@tes/core';
import { httpFor } from '../../../services/gateway/src/errors';
import { escapePointer, loadOpenApi, OPENAPI_PATH, type OpenApiDocument } from '../src/openapi';
import { doc, isObj, needsAuth, operations, validator, type Obj } from './openapi-doc';

/** services/gateway/openapi.json itself: well-formed, complete and consistent with the gateway's error table. */

/** Every `$ref` in the document with the JSON pointer where it occurs. */
function refs(node: unknown, at = '#'): { at: string; ref: string }[] {
  if (Array.isArray(node)) return node.flatMap((v, i) => refs(v, `${at}/${i}`));
  if (!isObj(node)) return [];
  const own = typeof node.$ref === 'string' ? [{ at, ref: node.$ref }] : [];
  return [...own, ...Object.entries(node).flatMap(([k, v]) => refs(v, `${at}/${escapePointer(k)}`))];
}

function deref(pointer: string): { pointer: string; value: Obj } {
  let current = pointer;
  for (;;) {
    const value = validator.resolvePointer(current);
    if (!isObj(value)) throw new Error(`${current} does not resolve to an object`);
    if (typeof value.$ref !== 'string') return { pointer: current, value };
    current = value.$ref;
  }
}

/** The (error.status, error.message) pairs an error response schema allows. */
function errorPairs(responsePointer: string): { status: string; message: string }[] {
  const schema = deref(`${deref(responsePointer).pointer}/content/application~1json/schema`).value;
  const narrow = ((schema.allOf as Obj[])[1]!.properties as Obj).error as Obj;
  const branches = (narrow.anyOf as Obj[] | undefined) ?? [narrow];
  return branches.flatMap((b) => {
    const props = b.properties as { status: { enum: string[] }; message: { enum: string[] } };
    return props.status.enum.flatMap((status) => props.message.enum.map((message) => ({ status, message })));
  });
}

/** Every JSON schema location of the document (components, media types, headers, parameters). */
function schemaPointers(): string[] {
  const out = Object.keys((doc.components as Obj).schemas as Obj).map((n) => `#/components/schemas/${escapePointer(n)}`);
  const walk = (node: unknown, at: string, parentKey: string | undefined): void => {
    if (!isObj(node)) return;
    for (const [k, v] of Object.entries(node)) {
      const here = `${at}/${escapePointer(k)}`;
      // `schema` of a media type, header or parameter object (not a property called "schema").
      if (k === 'schema' && isObj(v) && parentKey !== 'properties') out.push(here);
      else if (k !== 'schemas') walk(v, here, k);
    }
  };
  walk(doc.paths, '#/paths', undefined);
  walk(doc.components, '#/components', undefined);
  return out;
}

describe('the OpenAPI document', () => {
  it('is an OpenAPI 3.1 document with the 2020-12 dialect and bearer security', () => {
    expect(doc.openapi).toBe('3.1.0');
    expect(doc.jsonSchemaDialect).toBe('https://json-schema.org/draft/2020-12/schema');
    expect(doc.info).toEqual(expect.objectContaining({ title: expect.any(String), version: expect.any(String) }));
    expect(OPENAPI_PATH).toMatch(/services[/\\]gateway[/\\]openapi\.json$/);
    expect(doc.security).toEqual([{ bearerAuth: [] }]);
    expect((doc.components as Obj).securitySchemes).toEqual({ bearerAuth: expect.objectContaining({ type: 'http', scheme: 'bearer' }) });
    expect((doc.paths['/openapi.json']!.get as Obj).security).toEqual([]);
  });

  it('describes exactly the public paths', () => {
    expect(operations.map((o) => `${o.method.toUpperCase()} ${o.template}`).sort()).toEqual(
      [
        'GET /docs',
        'GET /docs/assets/{file}',
        'GET /docs/init.js',
        'GET /openapi.json',
        'GET /tools',
        'GET /tools/executions',
        'GET /tools/executions/{id}',
        'GET /tools/executions/{id}/events',
        'GET /tools/executions/{id}/artifacts/{artifactId}/download',
        'GET /tools/project',
        'GET /tools/usage',
        'GET /tools/{tool}',
        'GET /tools/webhooks',
        'GET /tools/webhooks/{id}/deliveries',
        'DELETE /tools/webhooks/{id}',
        'POST /tools/executions/{id}/cancel',
        'POST /tools/quote',
        'POST /tools/upload',
        'POST /tools/webhooks',
        'POST /tools/webhooks/{id}/rotate-secret',
        'POST /tools/webhooks/{id}/test',
        'POST /tools/{tool}',
      ].sort(),
    );
  });

  it('every $ref resolves inside the document', () => {
    const all = refs(doc);
    expect(all.length).toBeGreaterThan(100);
    const broken = all.filter(({ ref }) => !ref.startsWith('#/') || validator.resolvePointer(ref) === undefined);
    expect(broken).toEqual([]);
  });

  it('every component is used', () => {
    const used = new Set(refs(doc).map((r) => r.ref));
    const components = doc.components as Record<string, Obj>;
    const unused = ['schemas', 'responses', 'headers', 'parameters'].flatMap((kind) =>
      Object.keys(components[kind] ?? {})
        .map((name) => `#/components/${kind}/${name}`)
        .filter((p) => !used.has(p)),
    );
    expect(unused).toEqual([]);
  });

  it('every schema compiles with ajv (2020-12), also in strict mode', () => {
    const pointers = schemaPointers();
    expect(pointers.length).toBeGreaterThan(50);
    for (const p of pointers) expect(() => validator.schemaValidator(p)).not.toThrow();

    // Strict mode catches misspelt keywords (strict: false above would ignore them).
    // discriminator: OpenAPI's keyword on the tool-typed request bodies; strictRequired off as in
    // the catalog, whose input schemas they carry (a oneOf branch requires a property of its parent)
    const strict = new Ajv2020({ strict: true, strictRequired: false, allowUnionTypes: true, allErrors: true, discriminator: true });
    addFormats(strict);
    // The document's own fields are not schema keywords: declare them so strict mode only
    // judges the schemas inside.
    strict.addVocabulary(Object.keys(doc));
    strict.addSchema({ ...structuredClone(doc), $id: 'https://strict.invalid/openapi.json' });
    const failures: string[] = [];
    for (const p of pointers) {
      try {
        strict.compile({ $ref: `https://strict.invalid/openapi.json${p}` });
      } catch (err) {
        failures.push(`${p}: ${(err as Error).message}`);
      }
    }
    expect(failures).toEqual([]);
  });

  it('every operation has a unique operationId, a summary, responses and its path parameters', () => {
    const ids = operations.map((o) => o.operation.operationId);
    expect(ids.every((id) => typeof id === 'string' && /^[a-z][A-Za-z]+$/.test(id))).toBe(true);
    expect(new Set(ids).size).toBe(ids.length);
    for (const op of operations) {
      expect(typeof op.operation.summary).toBe('string');
      expect(Object.keys(op.operation.responses as Obj).length).toBeGreaterThan(0);
      const params = ((op.operation.parameters as Obj[]) ?? []).map((p) => (isObj(p) && typeof p.$ref === 'string' ? deref(p.$ref).value : p));
      const declared = params.filter((p) => p.in === 'path').map((p) => p.name);
      const inTemplate = [...op.template.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]);
      expect({ op: op.template, declared: [...declared].sort() }).toEqual({ op: op.template, declared: [...inTemplate].sort() });
      for (const p of params.filter((p) => p.in === 'path')) expect(p.required).toBe(true);
      for (const p of params) expect(['path', 'query', 'header', 'cookie']).toContain(p.in);
      // every response: a description and the headers every response carries
      for (const key of Object.keys(op.operation.responses as Obj)) {
        const r = deref(`${op.pointer}/responses/${key}`).value;
        expect(typeof r.description).toBe('string');
        const headers = Object.keys(r.headers as Obj);
        expect(headers).toEqual(expect.arrayContaining(['Cache-Control', 'X-Request-Id']));
        // JSON everywhere but the reference page's own HTML, script and assets
        const docs = op.template.startsWith('/docs') && key === '200';
        // the event stream's 200 is text/event-stream
        const stream = op.template.endsWith('/events') && key === '200';
        if (!docs) expect(Object.keys(r.content as Obj)).toEqual([stream ? 'text/event-stream' : 'application/json']);
      }
    }
  });

  it('every authenticated operation documents 401, 403, 404, 429, 500 and 503, and 2xx rate-limit headers', () => {
    const authed = operations.filter(needsAuth);
    expect(authed).toHaveLength(18);
    for (const op of authed) {
      const responses = op.operation.responses as Obj;
      expect({ op: op.template, codes: Object.keys(responses) }).toEqual({
        op: op.template,
        codes: expect.arrayContaining(['401', '403', '404', '429', '500', '503']),
      });
      expect(errorPairs(`${op.pointer}/responses/404`)).toContainEqual({ status: 'NOT_FOUND', message: 'route_not_found' });
      expect(typeof op.operation['x-required-scope']).toBe('string');
      for (const code of Object.keys(responses).filter((c) => c.startsWith('2'))) {
        const r = deref(`${op.pointer}/responses/${code}`);
        for (const h of ['RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset', 'RateLimit-Policy']) {
          expect(deref(`${r.pointer}/headers/${h}`).value.required).toBe(true);
        }
      }
      if (op.method === 'post') {
        expect(Object.keys(responses)).toEqual(expect.arrayContaining(['400', '413']));
        const pairs = errorPairs(`${op.pointer}/responses/400`);
        expect(pairs).toContainEqual({ status: 'INVALID_ARGUMENT', message: 'invalid_json' });
        expect(pairs).toContainEqual({ status: 'INVALID_ARGUMENT', message: 'unsupported_media_type' });
      }
    }
  });

  it('every error response pairs HTTP status, error.status and error.message as the gateway does, and every code is documented', () => {
    const seen = new Set<string>();
    const allResponses = operations.flatMap((op) =>
      Object.keys(op.operation.responses as Obj).map((code) => ({ where: op.template, pointer: `${op.pointer}/responses/${code}`, code })),
    );
    // the answer to a method a listed path does not take belongs to no operation
    allResponses.push({ where: 'x-method-not-allowed', pointer: '#/x-method-not-allowed', code: '405' });
    for (const { where, pointer, code } of allResponses.filter((r) => Number(r.code) >= 400)) {
      for (const pair of errorPairs(pointer)) {
        expect((ERROR_CODES as readonly string[]).includes(pair.message)).toBe(true);
        const mapped = httpFor(pair.message as ErrorCode);
        expect({ where: `${where} ${code} ${pair.message}`, http: mapped.http, status: mapped.status }).toEqual({
          where: `${where} ${code} ${pair.message}`,
          http: Number(code),
          status: pair.status,
        });
        seen.add(pair.message);
      }
    }
    expect(ERROR_CODES.filter((c) => !seen.has(c))).toEqual([]);
  });

  it('the examples in the document validate against their schemas', () => {
    let count = 0;
    const responses = (doc.components as Obj).responses as Record<string, Obj>;
    for (const [name, r] of Object.entries(responses)) {
      const media = (r.content as Obj)['application/json'] as Obj;
      if (media.example === undefined) continue;
      const v = validator.schemaValidator(`#/components/responses/${name}/content/application~1json/schema`);
      expect({ name, ok: v(media.example), errors: v.errors ?? null }).toEqual({ name, ok: true, errors: null });
      count++;
    }
    expect(count).toBeGreaterThan(10);
  });

  it('loadOpenApi reads services/gateway/openapi.json', () => {
    // The loader's type is honest: a parsed document is usable as the validator's input.
    expect(loadOpenApi(OPENAPI_PATH)).toEqual(doc satisfies OpenApiDocument);
  });
  it('its webhooks section names exactly the events the service sends (a merge once left a stray entry there)', () => {
    const webhooks = Object.keys((doc as unknown as { webhooks?: Obj }).webhooks ?? {}).sort();
    expect(webhooks).toEqual([...WEBHOOK_EVENTS, 'webhook.test'].sort());
  });
});
