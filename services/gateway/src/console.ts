import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import express, { type NextFunction, type Request, type RequestHandler, type Response } from 'express';
import type { Config } from '@tes/config';
import { AppError } from '@tes/core';

/** Hashed build output (dist/assets/index-<hash>.js): its name changes with its content. */
const IMMUTABLE = 'public, max-age=31536000, immutable';

/**
 * The browser console (clients/console, built by `npm run build` into its dist/), on the
 * API's own origin so it needs no CORS: GET /console is its page, /console/assets/* its
 * hashed scripts and styles. Not a declared route (openapi.json describes the API and its
 * reference); other methods are 405 and unknown files 404, in the usual envelope.
 *
 * The page's Content-Security-Policy allows scripts and styles from this origin only (no
 * inline code or style attributes), requests to this origin and to the object store (where
 * artifacts' download URLs point), and images and media from both (and blob: for the
 * previews of files about to be uploaded).
 */
export function consoleSite(config: Config): RequestHandler {
  const dist = consoleDist();
  const csp = contentSecurityPolicy(new URL(config.s3.publicEndpoint).origin);
  let page: string | undefined;
  const assets = express.static(path.join(dist, 'assets'), {
    index: false,
    redirect: false,
    fallthrough: false,
    setHeaders: (res) => res.setHeader('Cache-Control', IMMUTABLE),
  });
  const files = express.static(dist, { index: false, redirect: false, fallthrough: false });
  return (req: Request, res: Response, next: NextFunction) => {
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.set('Allow', 'GET, HEAD');
      throw new AppError('method_not_allowed', 'method_not_allowed', { details: { allowedMethods: ['GET', 'HEAD'] } });
    }
    res.set({ 'X-Content-Type-Options': 'nosniff', 'Referrer-Policy': 'no-referrer' });
    if (req.path === '/') {
      // read once, on the first request: a gateway started before the build still serves it then
      page ??= readPage(dist);
      if (page === undefined) {
        throw new AppError('service_unavailable', 'service_unavailable', {
          details: { reason: 'the console is not built or not installed: run npm run build' },
        });
      }
      res.set({ 'Content-Security-Policy': csp, 'X-Frame-Options': 'DENY' });
      res.type('text/html; charset=utf-8').send(page);
      return;
    }
    const serve = req.path.startsWith('/assets/') ? assets : req.path === '/favicon.svg' ? files : undefined;
    if (!serve) throw new AppError('route_not_found');
    if (serve === assets) req.url = req.url.slice('/assets'.length);
    // a file that is missing, refused or undecodable is simply not a route
    serve(req, res, (err?: unknown) => {
      if (err) res.set('Cache-Control', 'no-store');
      next(err ? new AppError('route_not_found') : undefined);
    });
  };
}

function contentSecurityPolicy(objectStore: string): string {
  return [
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self'",
    `img-src 'self' blob: ${objectStore}`,
    `media-src 'self' blob: ${objectStore}`,
    `connect-src 'self' ${objectStore}`,
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
  ].join('; ');
}

/**
 * The console package's build output (its folder's dist/), found as node finds the package.
 * An install without it (an image that left it out) still serves the API: /console is 503.
 */
function consoleDist(): string {
  try {
    return path.join(path.dirname(require.resolve('@tes/console/package.json')), 'dist');
  } catch {
    return path.join(__dirname, 'console-missing');
  }
}

function readPage(dist: string): string | undefined {
  const file = path.join(dist, 'index.html');
  return existsSync(file) ? readFileSync(file, 'utf8') : undefined;
}
