import express, { Router, type NextFunction, type Request, type RequestHandler, type Response } from 'express';
import { AppError } from '@tes/core';
import { requireScope } from './auth';
import { checkStorable } from './body-checks';
import type { AuthContext } from './context';
import type { CompiledOperation, RequestSchemas } from './request-schemas';
import type { KeyRoute, PublicRoute, RouteSpec } from './route-spec';
import { expressPath, inMatchingOrder, RouteTable } from './route-table';

/** Every body but the upload's is refused past this, before it is parsed (413 request_too_large). */
const JSON_BODY_LIMIT_BYTES = 64 * 1024;

const BODY_METHODS = new Set(['POST', 'PUT', 'PATCH']);

export interface MountedRoutes {
  /** Every route, in matching order. */
  router: Router;
  /** The methods each path takes (405 and Allow), from the same routes. */
  table: RouteTable;
}

/**
 * Compiles every route once, at start: checks each against its operation in openapi.json
 * (operationId, scope, whether it takes a body) so the code and the document cannot drift
 * apart, compiles the operation's request schemas, and registers the routes literal paths
 * first (registration order decides nothing). Throws on any disagreement.
 */
export function mountRoutes(routes: readonly RouteSpec[], schemas: RequestSchemas): MountedRoutes {
  const router = Router();
  const seen = new Set<string>();
  for (const route of inMatchingOrder(routes)) {
    const key = `${route.method.toUpperCase()} ${route.path}`;
    if (seen.has(key)) throw new Error(`${key} is declared twice`);
    seen.add(key);
    const operation = schemas.compile(route);
    if (operation.operationId !== route.operationId) throw new Error(`${key}: openapi.json names it ${operation.operationId}, the route ${route.operationId}`);
    const handlers = route.scope === 'public' ? publicChain(key, route, operation) : keyChain(key, route, operation);
    router[route.method](expressPath(route.path), ...handlers);
  }
  return { router, table: new RouteTable(routes) };
}

function publicChain(key: string, route: PublicRoute, operation: CompiledOperation): RequestHandler[] {
  if (operation.requiredScope !== undefined) throw new Error(`${key}: openapi.json requires ${operation.requiredScope}, the route is public`);
  return [(req, res) => route.handle(req, res)];
}

/**
 * Order, as every keyed request had it before routes were declared: the key and the rate
 * limit (app.ts, on /tools), then the body's type, its size and its storability, then the
 * scope, then (upload) a free slot and its body, then the route's own refusals, then the
 * query's and the body's shape.
 */
function keyChain(key: string, route: KeyRoute, operation: CompiledOperation): RequestHandler[] {
  // every key route is behind app.ts's authentication, mounted on /tools
  if (route.path !== '/tools' && !route.path.startsWith('/tools/')) throw new Error(`${key}: a keyed route must be under /tools`);
  if (operation.requiredScope !== route.scope) throw new Error(`${key}: openapi.json requires ${String(operation.requiredScope)}, the route ${route.scope}`);
  const declaresBody = operation.body !== undefined;
  if (declaresBody !== (route.body !== 'none'))
    throw new Error(`${key}: openapi.json ${declaresBody ? 'declares' : 'declares no'} request body, the route reads '${route.body}'`);
  if (route.body === 'upload' && route.bodyLimitBytes === undefined) throw new Error(`${key}: an upload route declares its body limit`);
  if (route.admit && route.body !== 'upload') throw new Error(`${key}: only an upload route admits before reading its body`);

  const limit = route.bodyLimitBytes ?? JSON_BODY_LIMIT_BYTES;
  const chain: RequestHandler[] = [];
  if (route.method === 'get') chain.push(readBody(undefined));
  else chain.push(readBody(route.body === 'upload' ? undefined : jsonParser(limit)));
  chain.push(requireScope(route.scope));
  if (route.body === 'upload') {
    if (route.admit) chain.push(route.admit);
    chain.push(jsonParser(limit), (req, _res, next) => {
      checkStorable(req.body, {});
      next();
    });
  }
  chain.push(async (req: Request, res: Response) => {
    route.precheck?.(req, operation);
    const query = operation.query ? operation.query(req.query) : req.query;
    const body = operation.body ? operation.body(req.body) : undefined;
    await route.handle({ req, res, auth: res.locals.auth as AuthContext, query, body });
  });
  return chain;
}

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
function readBody(parse: RequestHandler | undefined): RequestHandler {
  return (req: Request, res: Response, next: NextFunction) => {
    const parsed = (err?: unknown): void => {
      if (err) {
        next(err);
        return;
      }
      try {
        checkStorable(req.body, req.query);
      } catch (e) {
        next(e);
        return;
      }
      next();
    };
    if (BODY_METHODS.has(req.method)) {
      const hasBody = Number(req.get('content-length') ?? 0) > 0 || req.get('transfer-encoding') !== undefined;
      if (hasBody && !req.is('application/json')) {
        throw new AppError('unsupported_media_type', 'unsupported_media_type', { details: { expected: 'application/json' } });
      }
      if (parse) {
        parse(req, res, parsed);
        return;
      }
    }
    parsed();
  };
}

/** readBody for a request no route takes: parsed as any JSON body would be. */
export const readUnroutedBody = (): RequestHandler => readBody(jsonParser(JSON_BODY_LIMIT_BYTES));
