import type { Response } from 'express';
import { AppError } from '@tes/core';

/**
 * The part of Express 5's router layers (npm `router` 2.x) read here. The router decides
 * which route a path reaches; asking its own layers which methods a path takes keeps the
 * Allow header from drifting away from the routes. Hazard: these are the router's internals;
 * tests/e2e/security-envelope.test.ts fails if an upgrade changes them.
 */
interface RouterLayer {
  route?: { methods: Record<string, boolean | undefined> };
  handle: unknown;
  match(path: string): { path: string } | false;
}

/** The methods routes take for a path, in the order Allow lists them (GET with HEAD). */
export class AllowedMethods {
  private everyMethod: Set<string> | undefined;

  /** `stack` is read when first needed: every route is declared by then. */
  constructor(private readonly stack: () => RouterLayer[]) {}

  static of(app: unknown): AllowedMethods {
    return new AllowedMethods(() => (app as { router: { stack: RouterLayer[] } }).router.stack);
  }

  /** Methods the path takes; empty when no route matches it. */
  for(path: string): string[] {
    const into = new Set<string>();
    collect(this.stack(), path, into);
    return [...into].sort();
  }

  /** Whether any route at all takes `method` (the others are refused before the body is read). */
  routes(method: string): boolean {
    if (!this.everyMethod) {
      this.everyMethod = new Set();
      collect(this.stack(), undefined, this.everyMethod);
    }
    return this.everyMethod.has(method);
  }

  /** 405 with Allow when the path is a route's, else 404. */
  refusal(path: string, res: Response): AppError {
    const allowed = this.for(path);
    if (allowed.length === 0) return new AppError('route_not_found');
    res.set('Allow', allowed.join(', '));
    return new AppError('method_not_allowed', 'method_not_allowed', { details: { allowedMethods: allowed } });
  }
}

/** Adds the methods of every route matching `path` (of every route when `path` is undefined). */
function collect(stack: RouterLayer[], path: string | undefined, into: Set<string>): void {
  for (const layer of stack) {
    let matched: { path: string } | false = { path: '' };
    if (path !== undefined) {
      try {
        matched = layer.match(path);
      } catch {
        matched = false; // a path the router cannot percent-decode reaches no route
      }
    }
    if (!matched) continue;
    if (layer.route) {
      for (const [method, on] of Object.entries(layer.route.methods)) if (on && method !== '_all') into.add(method.toUpperCase());
      if (layer.route.methods.get) into.add('HEAD');
      continue;
    }
    // a router mounted with app.use(): its routes see the path without the mount's prefix
    const nested = (layer.handle as { stack?: unknown } | null)?.stack;
    if (Array.isArray(nested)) collect(nested as RouterLayer[], path === undefined ? undefined : path.slice(matched.path.length) || '/', into);
  }
}
