import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { markRoute } from './access-log';
import { authenticate } from './auth';
import type { AuthContext } from './context';
import type { KeyCache } from './key-cache';
import { readUnroutedBody, type CompiledKeyRoute } from './routing/mount-routes';
import type { RequestLimits } from './rate-limit';
import { paramsOf, type RouteTable } from './routing/route-table';
import type { UsageCounter } from './usage-counter';

/** Paths under /tools, as Express's app.use('/tools') takes them (any case, whole segments). */
const UNDER_TOOLS = /^\/tools(?:\/|$)/i;

interface ToolsGate {
  keys: KeyCache;
  limits: RequestLimits;
  usage: UsageCounter;
}

/**
 * Every request under /tools in one pass, instead of a chain of middleware and a router:
 *
 *  1. the route: the first keyed route, in matching order, that takes the method and the path
 *     (routing/route-table.ts matches as Express's router does); its template labels the request's
 *     metrics and log line from here on, so 401s and 429s carry it too (a path no route has
 *     with this method is labelled with the first template the path matches, if any);
 *  2. the key, then the request rate (a caller without a valid key, or past its limit, costs no
 *     body parsing; failed authentications count per address, requests per key), then the
 *     project's request count;
 *  3. the route's own steps (routing/mount-routes.ts: body, scope, checks, handler); or, when no route
 *     takes the request, a method no route takes is refused before its body is read, and any
 *     other request has its body read and checked like a routed one before its 404 or 405.
 */
export function toolsDispatch(keyed: readonly CompiledKeyRoute[], table: RouteTable, gate: ToolsGate): RequestHandler {
  return async (req: Request, res: Response, next: NextFunction): Promise<void> => {
    const path = req.path;
    if (!UNDER_TOOLS.test(path)) {
      next();
      return;
    }
    const method = req.method === 'HEAD' ? 'GET' : req.method;
    let route: CompiledKeyRoute | undefined;
    let match: RegExpExecArray | null = null;
    for (const r of keyed) {
      if (r.method !== method) continue;
      match = r.matcher.pattern.exec(path);
      if (match) {
        route = r;
        break;
      }
    }
    const template = route?.template ?? table.templateOf(path);
    if (template !== undefined) markRoute(res, template);

    const auth: AuthContext = await authenticate(gate.keys, gate.limits, req, res);
    res.locals.auth = auth;
    await gate.limits.perKey(res, auth);
    gate.usage.count(auth.projectId);

    if (!route || !match) {
      if (!table.takes(req.method)) throw table.refusal(path, res);
      await readUnroutedBody(req, res);
      throw table.refusal(path, res);
    }
    req.params = paramsOf(route.matcher, match);
    await route.run(req, res, auth);
  };
}
