/**
 * The gateway's routing kernel (this folder): how openapi.json and the routes declared in
 * ../routes become Express handlers that check what they receive before a handler runs.
 *
 * - route-spec.ts: what a route declares (method, OpenAPI path, operationId, scope, how its
 *   body is read, handler) and what its handler receives;
 * - request-schemas.ts: the operations of openapi.json, their request schemas compiled (ajv);
 * - route-table.ts: path templates, their matching order (literal segments first), and which
 *   methods a path takes (405 with Allow, or 404);
 * - body-checks.ts: the depth and storable-text checks on every body and query;
 * - mount-routes.ts (this file, the entry): checks each route against its operation at start
 *   and compiles it into one function: body, scope, request schemas, handler.
 *
 * Not here: who the caller is (../auth.ts), the request rate (../rate-limit.ts), the /tools
 * front door that applies both before a keyed route runs (../tools-dispatch.ts), and the
 * app's wiring (../app.ts).
 */
import express, { Router, type Request, type RequestHandler, type Response } from 'express';
import { AppError } from '@tes/core';
import { markRoute } from '../access-log';
import { requireScope } from '../auth';
import { checkStorable } from './body-checks';
import type { AuthContext } from '../context';
import type { CompiledOperation, RequestSchemas } from './request-schemas';
import type { KeyRoute, PublicRoute, RouteSpec } from './route-spec';
import { compileTemplate, expressPath, inMatchingOrder, RouteTable, type CompiledTemplate } from './route-table';

/** Every body but the upload's is refused past this, before it is parsed (413 request_too_large). */
const JSON_BODY_LIMIT_BYTES = 64 * 1024;

const BODY_METHODS = new Set(['POST', 'PUT', 'PATCH']);

export interface MountedRoutes {
  /** The public routes (the document and its pages), in matching order. */
  router: Router;
  /** The keyed routes (every one under /tools), in matching order; ../tools-dispatch.ts runs them. */
  keyed: CompiledKeyRoute[];
  /** The methods each path takes (405 and Allow), from the same routes. */
  table: RouteTable;
}

/** A keyed route, compiled: its matcher, and everything after the key and the rate limit in one function. */
export interface CompiledKeyRoute {
  /** Upper case; a GET route also takes HEAD. */
  method: string;
  /** The OpenAPI path template: the metrics' route label and the access log's route. */
  template: string;
  matcher: CompiledTemplate;
  run(req: Request, res: Response, auth: AuthContext): Promise<void>;
}

/**
 * Compiles every route once, at start: checks each against its operation in openapi.json
 * (operationId, scope, whether it takes a body) so the code and the document cannot drift
 * apart, compiles the operation's request schemas, and orders the routes literal paths first
 * (registration order decides nothing). Throws on any disagreement.
 */
export function mountRoutes(routes: readonly RouteSpec[], schemas: RequestSchemas): MountedRoutes {
  const router = Router();
  const keyed: CompiledKeyRoute[] = [];
  const seen = new Set<string>();
  for (const route of inMatchingOrder(routes)) {
    const key = `${route.method.toUpperCase()} ${route.path}`;
    if (seen.has(key)) throw new Error(`${key} is declared twice`);
    seen.add(key);
    const operation = schemas.compile(route);
    if (operation.operationId !== route.operationId) throw new Error(`${key}: openapi.json names it ${operation.operationId}, the route ${route.operationId}`);
    if (route.scope === 'public') router[route.method](expressPath(route.path), publicHandler(key, route, operation));
    else keyed.push({ method: route.method.toUpperCase(), template: route.path, matcher: compileTemplate(route.path), run: keyChain(key, route, operation) });
  }
  return { router, keyed, table: new RouteTable(routes) };
}

function publicHandler(key: string, route: PublicRoute, operation: CompiledOperation): RequestHandler {
  if (operation.requiredScope !== undefined) throw new Error(`${key}: openapi.json requires ${operation.requiredScope}, the route is public`);
  return (req, res) => {
    markRoute(res, route.path);
    route.handle(req, res);
  };
}

/**
 * Order, as every keyed request had it before routes were declared: the key and the rate
 * limit (tools-dispatch.ts), then the body's type, its size and its storability, then the
 * scope, then (upload) a free slot and its body, then the route's own refusals, then the
 * query's and the body's shape. One async function per route, not a chain of middleware:
 * each request makes one pass.
 */
function keyChain(key: string, route: KeyRoute, operation: CompiledOperation): CompiledKeyRoute['run'] {
  // every key route is behind the key check, on /tools
  if (route.path !== '/tools' && !route.path.startsWith('/tools/')) throw new Error(`${key}: a keyed route must be under /tools`);
  if (operation.requiredScope !== route.scope) throw new Error(`${key}: openapi.json requires ${String(operation.requiredScope)}, the route ${route.scope}`);
  const declaresBody = operation.body !== undefined;
  if (declaresBody !== (route.body !== 'none'))
    throw new Error(`${key}: openapi.json ${declaresBody ? 'declares' : 'declares no'} request body, the route reads '${route.body}'`);
  if (route.body === 'upload' && route.bodyLimitBytes === undefined) throw new Error(`${key}: an upload route declares its body limit`);
  if (route.admit && route.body !== 'upload') throw new Error(`${key}: only an upload route admits before reading its body`);

  const limit = route.bodyLimitBytes ?? JSON_BODY_LIMIT_BYTES;
  const parse = route.method === 'get' || route.body === 'upload' ? undefined : jsonParser(limit);
  const upload = route.body === 'upload' ? { admit: route.admit, parse: jsonParser(limit) } : undefined;
  return async (req, res, auth) => {
    await readBody(req, res, parse);
    requireScope(auth, route.scope);
    if (upload) {
      if (upload.admit) await pass(upload.admit, req, res);
      await pass(upload.parse, req, res);
      checkStorable(req.body, {});
    }
    route.precheck?.(req, operation, auth);
    const query = operation.query ? operation.query(req.query) : req.query;
    const body = operation.body ? operation.body(req.body) : undefined;
    await route.handle({ req, res, auth, query, body });
  };
}

/** Runs a middleware to its `next`: resolves when it calls next(), rejects on next(err) or a throw. */
function pass(handler: RequestHandler, req: Request, res: Response): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    try {
      void handler(req, res, (err?: unknown) => {
        if (err) reject(asError(err));
        else resolve();
      });
    } catch (err) {
      reject(asError(err));
    }
  });
}

/** body-parser and the upload's admission pass Error objects (http-errors); anything else is wrapped. */
const asError = (err: unknown): Error => (err instanceof Error ? err : new Error(String(err)));

function jsonParser(limitBytes: number): RequestHandler {
  return express.json({ limit: limitBytes, strict: true });
}

/**
 * The body's reading before the route: JSON bodies only, on the methods that take one (a body
 * sent with GET is ignored, unread); a body of another type is refused before any parsing.
 * Then the parsed body and the query must be storable. `parse` undefined: the route reads the
 * body itself (the upload, after a free slot was checked), or none is read. Also what a
 * request under /tools that no route takes goes through before its 404 or 405.
 */
async function readBody(req: Request, res: Response, parse: RequestHandler | undefined): Promise<void> {
  if (BODY_METHODS.has(req.method)) {
    const hasBody = Number(req.headers['content-length'] ?? 0) > 0 || req.headers['transfer-encoding'] !== undefined;
    if (hasBody && !req.is('application/json')) {
      throw new AppError('unsupported_media_type', 'unsupported_media_type', { details: { expected: 'application/json' } });
    }
    if (parse) await pass(parse, req, res);
  }
  checkStorable(req.body, req.query);
}

const unroutedParser = jsonParser(JSON_BODY_LIMIT_BYTES);

/** readBody for a request no route takes: parsed as any JSON body would be. */
export const readUnroutedBody = (req: Request, res: Response): Promise<void> => readBody(req, res, unroutedParser);
