import path from 'node:path';
import express, { type NextFunction, type Request, type RequestHandler, type Response } from 'express';
import { AppError } from '@tes/core';
import type { PublicRoute } from '../routing/route-spec';

/**
 * The API's own description, readable without a key: openapi.json as the file holds it, and
 * an interactive reference built from it (operations getOpenApiDocument, getDocs, getDocsInit).
 */
export function docsRoutes(document: string): PublicRoute[] {
  return [
    {
      method: 'get',
      path: '/openapi.json',
      operationId: 'getOpenApiDocument',
      scope: 'public',
      // byte for byte what the file holds, never a re-serialisation of the parsed document
      handle: (_req, res) => void res.set(DOCS_HEADERS).type('application/json; charset=utf-8').send(document),
    },
    {
      method: 'get',
      path: '/docs',
      operationId: 'getDocs',
      scope: 'public',
      handle: (_req, res) => void res.set(DOCS_HEADERS).type('text/html; charset=utf-8').send(DOCS_PAGE),
    },
    {
      method: 'get',
      path: '/docs/init.js',
      operationId: 'getDocsInit',
      scope: 'public',
      // the initializer is a file of its own so the page needs no inline script
      handle: (_req, res) => void res.set(DOCS_HEADERS).type('application/javascript; charset=utf-8').send(DOCS_INIT),
    },
  ];
}

/**
 * The reference's assets (operation getDocsAsset), served locally (no CDN), mounted on
 * /docs/assets. Not a declared route: it serves a folder, and answers other methods itself.
 */
export function docsAssets(): RequestHandler {
  const assets = express.static(swaggerUiAssets(), {
    index: false,
    redirect: false,
    fallthrough: false,
    setHeaders: (res) => res.setHeader('Cache-Control', 'no-store'),
  });
  return (req: Request, res: Response, next: NextFunction) => {
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.set('Allow', 'GET, HEAD');
      throw new AppError('method_not_allowed', 'method_not_allowed', { details: { allowedMethods: ['GET', 'HEAD'] } });
    }
    res.set(DOCS_HEADERS);
    // a file that is missing, refused or undecodable is simply not a route
    assets(req, res, (err?: unknown) => next(err ? new AppError('route_not_found') : undefined));
  };
}

/**
 * Every /docs response (the page, its initializer, its assets, the document) may not be framed
 * (clickjacking: "Try it out" sends requests with the key a user typed) nor sniffed into another
 * type. The page's policy allows what Swagger UI needs and no more: scripts, styles and fonts
 * from this origin, the `<style>` element Swagger UI injects (styles only: no script runs inline), the data: images its stylesheet
 * embeds, requests to this origin only ("Try it out" calls the origin the page was opened at).
 */
const DOCS_HEADERS = {
  'Content-Security-Policy': [
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self' 'unsafe-inline'",
    "img-src 'self' data:",
    "font-src 'self'",
    "connect-src 'self'",
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
  ].join('; '),
  'X-Frame-Options': 'DENY',
  'X-Content-Type-Options': 'nosniff',
  'Referrer-Policy': 'no-referrer',
} as const;

function swaggerUiAssets(): string {
  // Only the folder's path, resolved: requiring the package's index would evaluate the whole
  // 1.7 MB UI bundle in the gateway (~33 MB of memory) just to compute it.
  return path.dirname(require.resolve('swagger-ui-dist/absolute-path.js'));
}

const DOCS_PAGE = `<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>Tool Execution Service API</title>
  <link rel="stylesheet" href="/docs/assets/swagger-ui.css">
  <link rel="icon" type="image/png" href="/docs/assets/favicon-32x32.png">
</head>
<body>
  <div id="swagger-ui"></div>
  <script src="/docs/assets/swagger-ui-bundle.js"></script>
  <script src="/docs/assets/swagger-ui-standalone-preset.js"></script>
  <script src="/docs/init.js"></script>
</body>
</html>
`;

/**
 * Swagger UI 5 supports only the OAS base dialect and shows a warning box for any other
 * `jsonSchemaDialect`. Ours declares JSON Schema 2020-12 (what the gateway's ajv compiles, and
 * a subset of the base dialect), so the copy the reference renders leaves the field out, which
 * changes nothing it shows; /openapi.json itself is served as the file holds it.
 * The document's server is relative ("/"): "Try it out" calls the origin the page was opened at.
 */
const DOCS_INIT = `const withoutDialect = (res) => {
  if (res.ok && typeof res.text === 'string' && new URL(res.url, location.href).pathname === '/openapi.json') {
    const doc = JSON.parse(res.text);
    delete doc.jsonSchemaDialect;
    res.text = res.data = JSON.stringify(doc);
    res.body = res.obj = doc;
  }
  return res;
};
window.ui = SwaggerUIBundle({
  url: '/openapi.json',
  responseInterceptor: withoutDialect,
  dom_id: '#swagger-ui',
  presets: [SwaggerUIBundle.presets.apis, SwaggerUIStandalonePreset],
  layout: 'StandaloneLayout',
  persistAuthorization: false,
});
`;
