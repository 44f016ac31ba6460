import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import express, { type NextFunction, type Request, type Response } from 'express';
import { AppError, isAppError } from '@tes/core';
import { isConnectionError } from '@tes/db';
import { authenticate } from './auth';
import type { AuthContext, GatewayDeps } from './context';
import { httpFor } from './errors';
import { executionRoutes } from './routes/executions';
import { projectRoutes } from './routes/project';
import { toolRoutes } from './routes/tools';
import { UPLOAD_BODY_LIMIT_BYTES, uploadRoutes } from './routes/upload';
import { RequestLimits } from './rate-limit';

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;
const BODY_METHODS = new Set(['POST', 'PUT', 'PATCH']);
/** Deeper JSON than this is refused: canonicalisation and cloning recurse on it. */
export const MAX_JSON_DEPTH = 64;
export const JSON_BODY_LIMIT = '64kb';

/** Builds the Express app; no network port is opened here, so supertest can drive it. */
export function createApp(deps: GatewayDeps): express.Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);

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
    next();
  });

  // JSON bodies only, on the methods that take one (a body sent with GET is ignored, unread).
  // A body of another type is refused before any parsing.
  app.use((req: Request, _res: Response, next: NextFunction) => {
    if (!BODY_METHODS.has(req.method)) return next();
    const hasBody = Number(req.get('content-length') ?? 0) > 0 || req.get('transfer-encoding') !== undefined;
    if (hasBody && !req.is('application/json')) {
      throw new AppError('unsupported_media_type', 'unsupported_media_type', { details: { expected: 'application/json' } });
    }
    next();
  });
  // The upload route alone takes a body large enough for 12 MiB of Base64; every other
  // route refuses bodies over 64 KiB with 413 before parsing them.
  const jsonParser = express.json({ limit: JSON_BODY_LIMIT, strict: true });
  const uploadParser = express.json({ limit: UPLOAD_BODY_LIMIT_BYTES, strict: true });
  app.use((req: Request, res: Response, next: NextFunction) => {
    if (!BODY_METHODS.has(req.method)) return next();
    (req.path === '/tools/upload' ? uploadParser : jsonParser)(req, res, next);
  });

  const openapi = loadOpenApiDocument();
  app.get('/openapi.json', (_req: Request, res: Response) => {
    if (!openapi) throw new AppError('route_not_found');
    res.type('application/json; charset=utf-8').send(openapi);
  });

  // Interactive API reference from the same document, with its assets served locally (no CDN).
  const assets = express.static(swaggerUiAssets(), { index: false, redirect: false, fallthrough: false, setHeaders: (res) => res.setHeader('Cache-Control', 'no-store') });
  app.use('/docs/assets', (req: Request, res: Response, next: NextFunction) => {
    // other methods fall through to route_not_found; a file that is missing, refused or
    // undecodable is simply not a route
    if (req.method !== 'GET' && req.method !== 'HEAD') return next();
    assets(req, res, (err?: unknown) => next(err ? new AppError('route_not_found') : undefined));
  });
  app.get('/docs', (_req: Request, res: Response) => {
    res.type('text/html; charset=utf-8').send(DOCS_PAGE);
  });
  // the initializer is a file of its own so the page needs no inline script
  app.get('/docs/init.js', (_req: Request, res: Response) => {
    res.type('application/javascript; charset=utf-8').send(DOCS_INIT);
  });

  const limits = new RequestLimits(deps.db, deps.config.rateLimitPerMinute);
  app.use('/tools', authenticate(deps.keys, limits), limits.perKeyMiddleware(), (req: Request, res: Response, next: NextFunction) => {
    deps.usage.count((res.locals.auth as AuthContext).projectId);
    // Text that Postgres cannot store (NUL, unpaired surrogates) is refused here, on every
    // route, rather than failing later inside a transaction.
    if (tooDeep(req.body, 0)) {
      throw new AppError('invalid_request', 'invalid_request', { details: { message: `JSON nested deeper than ${MAX_JSON_DEPTH} levels` } });
    }
    const where = unstorableText(req.body, '') ?? unstorableText(req.query, '?');
    if (where !== undefined) {
      throw new AppError('invalid_request', 'invalid_request', { details: { instancePath: where, message: 'text must not contain NUL characters or unpaired surrogates' } });
    }
    next();
  });
  app.use(projectRoutes(deps));
  app.use(uploadRoutes(deps));
  app.use(executionRoutes(deps));
  app.use(toolRoutes(deps));

  app.use(() => {
    throw new AppError('route_not_found');
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
  // The database or broker is unreachable or restarting: temporarily unavailable, not a bug.
  if (isConnectionError(err)) return new AppError('service_unavailable', 'service_unavailable', { retryable: true });
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

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** Whether a parsed JSON value nests deeper than MAX_JSON_DEPTH (stops as soon as it knows). */
function tooDeep(value: unknown, depth: number): boolean {
  if (value === null || typeof value !== 'object') return false;
  if (depth >= MAX_JSON_DEPTH) return true;
  for (const v of Array.isArray(value) ? value : Object.values(value)) if (tooDeep(v, depth + 1)) return true;
  return false;
}

/** The path of the first string (or key) holding NUL or an unpaired surrogate, if any. */
function unstorableText(value: unknown, path: string, depth = 0): string | undefined {
  if (depth > MAX_JSON_DEPTH) return undefined; // deeper bodies were refused already
  if (typeof value === 'string') return value.includes('\u0000') || LONE_SURROGATE.test(value) ? path || '/' : undefined;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = unstorableText(value[i], `${path}/${i}`, depth + 1);
      if (found !== undefined) return found;
    }
    return undefined;
  }
  if (value !== null && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) {
      const found = unstorableText(k, `${path}/${k.replace(/[^\x20-\x7e]/g, '?')}`, depth + 1) ?? unstorableText(v, `${path}/${k.replace(/[^\x20-\x7e]/g, '?')}`, depth + 1);
      if (found !== undefined) return found;
    }
  }
  return undefined;
}
