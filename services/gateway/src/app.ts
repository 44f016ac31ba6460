import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import express, { type NextFunction, type Request, type Response } from 'express';
import { AppError, isAppError } from '@tes/core';
import { isConnectionError, isRetryableTransactionError, isTimeoutError } from '@tes/db';
import { AccessLog, markError, markRefusal, routeOf } from './access-log';
import { consoleSite } from './console';
import type { GatewayDeps } from './context';
import { httpFor } from './errors';
import { mountRoutes } from './routing/mount-routes';
import { RequestLimits } from './rate-limit';
import { RequestSchemas, type OpenApiDocument } from './routing/request-schemas';
import { sendJson } from './respond';
import { apiRoutes, docsAssets, docsRoutes } from './routes';
import { toolsDispatch } from './tools-dispatch';
import { serverSpan, tracingOn } from '@tes/tracing';

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** Builds the Express app; no network port is opened here, so supertest can drive it. */
export function createApp(deps: GatewayDeps): express.Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  // req.ip: the socket's peer unless TRUST_PROXY names the proxies whose X-Forwarded-For
  // may be believed; the failed-authentication throttle counts per req.ip.
  app.set('trust proxy', deps.config.trustProxy);

  // An HTTP server span per request, installed only when tracing is on (libs/tracing).
  if (tracingOn()) app.use((req: Request, res: Response, next: NextFunction) => serverSpan(req, res, next, () => routeOf(res)));

  // Every response, errors and unknown paths included, is uncacheable, carries a request id and
  // is counted and logged (access-log.ts).
  const accessLog = new AccessLog(deps.logger, deps.metrics.httpDuration, deps.config.accessLogSample);
  app.use((req: Request, res: Response, next: NextFunction) => {
    const incoming = req.get('x-request-id');
    const requestId = incoming && REQUEST_ID.test(incoming) ? incoming : randomUUID();
    res.locals.requestId = requestId;
    res.setHeader('Cache-Control', 'no-store');
    res.setHeader('X-Request-Id', requestId);
    accessLog.begin(req, res, requestId);
    // Node answers an HTTP/1.1 request without Host itself, outside the envelope, unless
    // server.ts turns that off (requireHostHeader: false); RFC 9112 still wants the 400.
    if (req.httpVersion === '1.1' && req.headers.host === undefined) {
      res.set('Connection', 'close');
      throw new AppError('invalid_request', 'invalid_request', { details: { reason: 'an HTTP/1.1 request needs a Host header' } });
    }
    next();
  });

  // Every route is declared once (routes/), its request schemas taken from openapi.json.
  const text = readOpenApiDocument();
  const { router, keyed, table } = mountRoutes([...docsRoutes(text), ...apiRoutes(deps)], new RequestSchemas(JSON.parse(text) as OpenApiDocument));

  // Interactive API reference from the same document, with its assets served locally (no CDN).
  app.use('/docs/assets', docsAssets());
  // The browser console (clients/console's build), on this origin: no CORS, no key in a URL.
  app.use('/console', consoleSite(deps.config));

  // Every request under /tools in one pass: its route, the key, the request rate, and only
  // then the body (tools-dispatch.ts).
  const limits = new RequestLimits(deps.db, deps.config.rateLimitPerMinute, deps.logger);
  app.use(toolsDispatch(keyed, table, { keys: deps.keys, limits, usage: deps.usage }));

  // A method no route takes (OPTIONS, PUT, DELETE, ...) is refused before its body is read,
  // and before a router's automatic OPTIONS answer (text/plain, outside the envelope).
  app.use((req: Request, res: Response, next: NextFunction) => {
    if (!table.takes(req.method)) throw table.refusal(req.path, res);
    next();
  });

  // The public routes (the document and its pages).
  app.use(router);

  // No route answered: a path some route has, with another method, is 405; else 404.
  app.use((req: Request, res: Response) => {
    throw table.refusal(req.path, res);
  });

  app.use((err: unknown, _req: Request, res: Response, _next: NextFunction) => {
    const appError = toAppError(err);
    const { http, status } = httpFor(appError.code);
    if (http >= 500 && appError.code === 'internal_error') {
      deps.logger.error('gateway.http.unhandled', { requestId: res.locals.requestId as string, err });
    }
    const details = appError.details;
    if (res.headersSent) return;
    markError(res, appError.code);
    // an operator's switch, not a failure
    if (appError.code === 'execution_disabled') markRefusal(res);
    // a refusal that knows when to come back (an upload slot's turn) has set its own
    if (appError.code === 'service_unavailable' && !res.hasHeader('Retry-After')) res.set('Retry-After', '2');
    if (http === 429 || http === 503) deps.metrics.httpRejections.inc({ reason: appError.code });
    sendJson(res, http, { error: { status, message: appError.code, ...(details ? { details } : {}) } });
  });

  return app;
}

/** Body-parser and router errors arrive as plain errors with a `type` or `status`. */
function toAppError(err: unknown): AppError {
  if (isAppError(err)) return err;
  const e = err as { type?: string; status?: number; statusCode?: number } | null;
  switch (e?.type) {
    case 'entity.parse.failed':
      return new AppError('invalid_json');
    case 'entity.too.large':
      return new AppError('request_too_large', 'request_too_large', { details: { limitBytes: (err as { limit?: number }).limit } });
    case 'encoding.unsupported':
    case 'charset.unsupported':
      return new AppError('unsupported_media_type');
    case 'request.aborted':
    case 'request.size.invalid':
    case 'stream.encoding.set':
      return new AppError('invalid_request');
    default:
      break;
  }
  // The database or broker is unreachable or restarting, a transaction lost a deadlock or a
  // serialization conflict, or a statement reached a bound on waiting (a lock held too long, a
  // statement too slow: DB_*_TIMEOUT_MS): temporarily unavailable (retry), not a bug.
  if (isConnectionError(err) || isRetryableTransactionError(err) || isTimeoutError(err))
    return new AppError('service_unavailable', 'service_unavailable', { retryable: true });
  // Defence in depth: text the database cannot store is the caller's input, not our failure.
  const pg = (err as { code?: unknown } | null)?.code;
  if (pg === '22P05' || pg === '22021') return new AppError('invalid_request');
  // a path the router cannot percent-decode names no route
  if (err instanceof URIError) return new AppError('route_not_found');
  const status = e?.status ?? e?.statusCode;
  if (status === 400) return new AppError('invalid_request');
  // static files (the docs' assets): missing or refused paths are simply not routes
  if (status === 403 || status === 404 || status === 405) return new AppError('route_not_found');
  return new AppError('internal_error');
}

/**
 * The OpenAPI document beside the package (services/gateway/openapi.json), read once: served
 * as it is, and the source of every request schema, so the gateway cannot start without it.
 */
function readOpenApiDocument(): string {
  return readFileSync(path.resolve(__dirname, '../openapi.json'), 'utf8');
}
