/**
 * Routes declared once (issue #12): the route list against openapi.json, the matching order,
 * the Allow table against Express's own router, and the request checks compiled from the
 * document. No database: the routes' handlers are never run here.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parse } from 'node:querystring';
import express from 'express';
import supertest from 'supertest';
import { isAppError } from '@tes/core';
import type { GatewayDeps } from '../src/context';
import { mountRoutes } from '../src/routing/mount-routes';
import { RequestSchemas, type OpenApiDocument } from '../src/routing/request-schemas';
import type { KeyRoute, RouteSpec } from '../src/routing/route-spec';
import { expressPath, inMatchingOrder, RouteTable } from '../src/routing/route-table';
import { apiRoutes, docsRoutes } from '../src/routes';

const document = JSON.parse(readFileSync(path.resolve(__dirname, '../openapi.json'), 'utf8')) as OpenApiDocument;
const deps = { config: { uploadConcurrency: 2, uploadMinBytesPerSecond: 0 } } as unknown as GatewayDeps;
const routes: RouteSpec[] = [...docsRoutes('{}'), ...apiRoutes(deps)];

/** The invalid_request details a check throws, or 'ok'. */
function outcome(check: (v: unknown) => unknown, value: unknown): unknown {
  try {
    check(value);
    return 'ok';
  } catch (err) {
    if (!isAppError(err) || err.code !== 'invalid_request') throw err;
    return err.details;
  }
}

describe('mountRoutes: every route checked against its operation in openapi.json at start', () => {
  it('mounts the gateway routes, one per documented operation but the docs assets', () => {
    expect(() => mountRoutes(routes, new RequestSchemas(document))).not.toThrow();
    const documented = Object.values(document.paths).flatMap((item) => Object.values(item).map((op) => (op as { operationId: string }).operationId));
    expect(routes.map((r) => r.operationId).sort()).toEqual(documented.filter((id) => id !== 'getDocsAsset').sort());
  });

  const quote = routes.find((r) => r.operationId === 'createQuote') as KeyRoute;
  it.each<[string, RouteSpec[], RegExp]>([
    ['another operationId', [{ ...quote, operationId: 'quote' }], /names it createQuote/],
    ['another scope', [{ ...quote, scope: 'tools:execute' }], /requires tools:read/],
    ['no body where the document declares one', [{ ...quote, body: 'none' }], /declares request body/],
    ['an undocumented operation', [{ ...quote, method: 'get' }], /no operation GET \/tools\/quote/],
    ['a route declared twice', [quote, quote], /declared twice/],
  ])('refuses %s', (_what, list, message) => {
    expect(() => mountRoutes(list, new RequestSchemas(document))).toThrow(message);
  });
});

describe('matching order and the Allow table', () => {
  it('puts literal segments before parameters, whatever the declaration order', () => {
    const order = inMatchingOrder([...routes].reverse()).map((r) => `${r.method} ${r.path}`);
    expect(order.indexOf('post /tools/quote')).toBeLessThan(order.indexOf('post /tools/{tool}'));
    expect(order.indexOf('post /tools/upload')).toBeLessThan(order.indexOf('post /tools/{tool}'));
    expect(order.indexOf('get /tools/executions')).toBeLessThan(order.indexOf('post /tools/{tool}'));
  });

  it('allows for a path exactly the methods Express routes it with', async () => {
    const table = new RouteTable(routes);
    const app = express();
    for (const r of inMatchingOrder(routes)) app[r.method](expressPath(r.path), (_req, res) => void res.status(204).end());
    app.use((_req: express.Request, res: express.Response) => void res.status(404).end());
    const paths = [
      '/tools',
      '/tools/',
      '/TOOLS',
      '/tools/quote',
      '/tools/Quote/',
      '/tools/quote//',
      '/tools//quote',
      '/tools/upload',
      '/tools/%71uote',
      '/tools/%ZZ',
      '/tools/image.render',
      '/tools/a/b',
      '/tools/executions',
      '/tools/executions/exe_x',
      '/tools/executions/%ZZ',
      '/tools/executions/x/cancel',
      '/tools/executions/x/artifacts/y/download',
      '/tools/executions/x/y',
      '/openapi.json',
      '/docs',
      '/docs/init.js',
      '/nope',
    ];
    const seen: string[] = [];
    const expected: string[] = [];
    for (const p of paths) {
      for (const method of ['GET', 'HEAD', 'POST'] as const) {
        const res = await supertest(app)[method === 'GET' ? 'get' : method === 'HEAD' ? 'head' : 'post'](p);
        if (res.status === 204) seen.push(`${method} ${p}`);
        if (table.allowed(p).includes(method)) expected.push(`${method} ${p}`);
      }
    }
    expect(seen).toEqual(expected);
    expect(table.allowed('/tools/executions')).toEqual(['GET', 'HEAD', 'POST']);
    expect(table.takes('PUT')).toBe(false);
  });
});

describe('request checks compiled from openapi.json', () => {
  const schemas = new RequestSchemas(document);
  const submit = schemas.compile({ method: 'post', path: '/tools/{tool}' });
  const upload = schemas.compile({ method: 'post', path: '/tools/upload' });
  const list = schemas.compile({ method: 'get', path: '/tools/executions' });

  it('reports ajv errors as the routes did before their schemas moved to the document', () => {
    expect(outcome(submit.body!, { tool: 'a'.repeat(101), arguments: {}, priceVersion: 'v', maximumChargeMicros: 1.5, extra: 1 })).toEqual({
      errors: [
        { instancePath: '', keyword: 'additionalProperties', message: 'must NOT have additional properties', params: { additionalProperty: 'extra' } },
        { instancePath: '/tool', keyword: 'maxLength', message: 'must NOT have more than 100 characters', params: { limit: 100 } },
        { instancePath: '/maximumChargeMicros', keyword: 'type', message: 'must be integer', params: { type: 'integer' } },
      ],
    });
    expect(outcome(submit.body!, { tool: 'a', arguments: {}, priceVersion: 'v', maximumChargeMicros: 2 ** 53 })).toMatchObject({
      errors: [{ keyword: 'maximum' }],
    });
    expect(outcome(upload.body!, { mimeType: '', data: 'AA==' })).toMatchObject({ errors: [{ instancePath: '/mimeType', keyword: 'minLength' }] });
    expect(outcome(upload.body!, { mimeType: 'x'.repeat(101), data: 'AA==' })).toMatchObject({ errors: [{ instancePath: '/mimeType', keyword: 'maxLength' }] });
  });

  it('takes only the declared query parameters, an integer in its canonical decimal form only', () => {
    for (const limit of ['1', '20', '100']) expect(outcome(list.query!, { limit })).toBe('ok');
    for (const limit of ['0', '101', '01', '1.0', ' 1', '+1', '1e1', '0x10', 'abc', ['1', '2']])
      expect([limit, outcome(list.query!, { limit })]).not.toEqual([limit, 'ok']);
    expect(outcome(list.query!, { status: 'succeeded', tool: 'test.sleep', before: 'exe_01ARZ3NDEKTSV4RRFFQ69G5FAV' })).toBe('ok');
    expect(outcome(list.query!, { status: 'done' })).toMatchObject({ errors: [{ instancePath: '/status', keyword: 'enum' }] });
    expect(outcome(list.query!, parse('__proto__=1'))).toMatchObject({ errors: [{ keyword: 'additionalProperties' }] });
    expect(outcome(list.query!, { extra: '1' })).toMatchObject({ errors: [{ keyword: 'additionalProperties', params: { additionalProperty: 'extra' } }] });
  });

  it('checks header parameters against the document (the Idempotency-Key pattern)', () => {
    expect(submit.headerConforms('Idempotency-Key', 'render-0001')).toBe(true);
    expect(submit.headerConforms('idempotency-key', 'short')).toBe(false);
    expect(submit.headerConforms('Idempotency-Key', 'with space 0001')).toBe(false);
  });
});
