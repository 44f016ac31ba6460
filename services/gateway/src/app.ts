import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import express, { type NextFunction, type Request, type Response } from 'express';
import { AppError, isAppError } from '@tes/core';
import { isConnectionError, isRetryableTransactionError } from '@tes/db';
import { authenticate } from './auth';
import type { AuthContext, GatewayDeps } from './context';
import { httpFor } from './errors';
import { executionRoutes } from './routes/executions';
import { projectRoutes } from './routes/project';
import { toolRoutes } from './routes/tools';
import { uploadRoutes } from './routes/upload';
import { RequestLimits } from './rate-limit';
import { checkStorable } from './body-checks';
import { AllowedMethods } from './methods';

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;
const BODY_METHODS = new Set(['POST', 'PUT', 'PATCH']);
export const JSON_BODY_LIMIT = '64kb';

/** Builds the Express app; no network port is opened here, so supertest can drive it. */
export function createApp(deps: GatewayDeps): express.Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  // req.ip: the socket's peer unless TRUST_PROXY names the proxies whose X-Forwarded-For
  // may be believed; the failed-authentication throttle counts per req.ip.
  app.set('trust proxy', deps.config.trustProxy);
  const allowed = AllowedMethods.of(app);

  // Every response, errors and unknown paths included, is uncacheable and carries a request id.
  app.use((req: Request, res: Response, next: NextFunction) => {
    const incoming = req.get('x-request-id');
    const requestId = incoming && REQUEST_ID.test(incoming) ? incoming : randomUUID();
    res.locals.requestId = requestId;
    res.set({ 'Cache-Control': 'no-store', 'X-Request-Id': requestId });
    const started = process.hrtime.bigint();
    res.on('finish', () => {
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      const route = (req.route?.path as string | undefined) ?? 'unmatched';
      deps.metrics.httpDuration.observe({ method: req.method, route, status: String(res.statusCode) }, seconds);
      const level = res.statusCode >= 500 ? 'error' : 'http';
      if (!deps.logger.isLevelEnabled(level)) return;
      deps.logger.log(level, 'gateway.http.request', {
        requestId,
        method: req.method,
        route,
        status: res.statusCode,
        durationMs: Math.round(seconds * 1000),
        projectId: (res.locals.auth as AuthContext | undefined)?.projectId,
      });
    });
    // Node answers an HTTP/1.1 request without Host itself, outside the envelope, unless
    // server.ts turns that off (requireHostHeader: false); RFC 9112 still wants the 400.
    if (req.httpVersion === '1.1' && req.headers.host === undefined) {
      res.set('Connection', 'close');
      throw new AppError('invalid_request', 'invalid_request', { details: { reason: 'an HTTP/1.1 request needs a Host header' } });
    }
    next();
  });

  const openapi = loadOpenApiDocument();
  app.get('/openapi.json', (_req: Request, res: Response) => {
    if (!openapi) throw new AppError('route_not_found');
    res.type('application/json; charset=utf-8').send(openapi);
  });

  // Interactive API reference from the same document, with its assets served locally (no CDN).
  const assets = express.static(swaggerUiAssets(), { index: false, redirect: false, fallthrough: false, setHeaders: (res) => res.setHeader('Cache-Control', 'no-store') });
  app.use('/docs/assets', (req: Request, res: Response, next: NextFunction) => {
    // a file that is missing, refused or undecodable is simply not a route
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.set('Allow', 'GET, HEAD');
      throw new AppError('method_not_allowed', 'method_not_allowed', { details: { allowedMethods: ['GET', 'HEAD'] } });
    }
    assets(req, res, (err?: unknown) => next(err ? new AppError('route_not_found') : undefined));
  });
  app.get('/docs', (_req: Request, res: Response) => {
    res.type('text/html; charset=utf-8').send(DOCS_PAGE);
  });
  // the initializer is a file of its own so the page needs no inline script
  app.get('/docs/init.js', (_req: Request, res: Response) => {
    res.type('application/javascript; charset=utf-8').send(DOCS_INIT);
  });

  // Order: the key, then the request rate, and only then the body. A caller without a valid
  // key, or past its limit, costs no body parsing (and is counted: failed authentications
  // per address, requests per key).
  const limits = new RequestLimits(deps.db, deps.config.rateLimitPerMinute, deps.logger);
  app.use('/tools', authenticate(deps.keys, limits), limits.perKeyMiddleware(), (_req: Request, res: Response, next: NextFunction) => {
    deps.usage.count((res.locals.auth as AuthContext).projectId);
    next();
  });

  // A method no route takes (OPTIONS, PUT, DELETE, ...) is refused before its body is read,
  // and before a router's automatic OPTIONS answer (text/plain, outside the envelope).
  app.use((req: Request, res: Response, next: NextFunction) => {
    if (allowed.routes(req.method)) return next();
    throw allowed.refusal(req.path, res);
  });

  // JSON bodies only, on the methods that take one (a body sent with GET is ignored, unread).
  // A body of another type is refused before any parsing. Every route but the upload refuses
  // bodies over 64 KiB with 413 before parsing them. The upload's body (up to 16 MiB of
  // Base64) is read by its route, after a free upload slot was also checked. Then the parsed
  // body and the query must be storable (the upload checks its own body).
  const jsonParser = express.json({ limit: JSON_BODY_LIMIT, strict: true });
  app.use('/tools', (req: Request, res: Response, next: NextFunction) => {
    const parsed = (err?: unknown): void => {
      if (err) return next(err);
      try {
        checkStorable(req.body, req.query);
      } catch (e) {
        return next(e);
      }
      next();
    };
    // req.path is relative to the /tools mount here
    if (!BODY_METHODS.has(req.method)) return parsed();
    const hasBody = Number(req.get('content-length') ?? 0) > 0 || req.get('transfer-encoding') !== undefined;
    if (hasBody && !req.is('application/json')) {
      throw new AppError('unsupported_media_type', 'unsupported_media_type', { details: { expected: 'application/json' } });
    }
    if (req.path === '/upload') return parsed();
    jsonParser(req, res, parsed);
  });

  app.use(projectRoutes(deps));
  app.use(uploadRoutes(deps));
  app.use(executionRoutes(deps));
  app.use(toolRoutes(deps));

  // No route answered: a path some route has, with another method, is 405; else 404.
  app.use((req: Request, res: Response) => {
    throw allowed.refusal(req.path, res);
  });

  app.use((err: unknown, _req: Request, res: Response, _next: NextFunction) => {
    const appError = toAppError(err);
    const { http, status } = httpFor(appError.code);
    if (http >= 500 && appError.code === 'internal_error') {
      deps.logger.error('gateway.http.unhandled', { requestId: res.locals.requestId, err });
    }
    const details = appError.details;
    if (res.headersSent) return;
    if (appError.code === 'service_unavailable') res.set('Retry-After', '2');
    res.status(http).json({ error: { status, message: appError.code, ...(details ? { details } : {}) } });
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
  // The database or broker is unreachable or restarting, or a transaction lost a deadlock or a
  // serialization conflict: temporarily unavailable (retry), not a bug.
  if (isConnectionError(err) || isRetryableTransactionError(err)) return new AppError('service_unavailable', 'service_unavailable', { retryable: true });
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

/** The OpenAPI document beside the package (services/gateway/openapi.json), read once. */
function loadOpenApiDocument(): string | undefined {
  try {
    return readFileSync(path.resolve(__dirname, '../openapi.json'), 'utf8');
  } catch {
    return undefined;
  }
}

function swaggerUiAssets(): string {
  // Only the folder's path: requiring the package's index would evaluate the whole 1.7 MB
  // UI bundle in the gateway (~33 MB of memory) just to compute it.
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  return (require('swagger-ui-dist/absolute-path.js') as () => string)();
}

const DOCS_PAGE = `<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>Tool Execution Service API</title>
  <link rel="stylesheet" href="/docs/assets/swagger-ui.css">
</head>
<body>
  <div id="swagger-ui"></div>
  <script src="/docs/assets/swagger-ui-bundle.js"></script>
  <script src="/docs/assets/swagger-ui-standalone-preset.js"></script>
  <script src="/docs/init.js"></script>
</body>
</html>
`;

const DOCS_INIT = `window.ui = SwaggerUIBundle({
  url: '/openapi.json',
  dom_id: '#swagger-ui',
  presets: [SwaggerUIBundle.presets.apis, SwaggerUIStandalonePreset],
  layout: 'StandaloneLayout',
  persistAuthorization: false,
});
`;

