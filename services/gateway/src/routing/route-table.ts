import type { Response } from 'express';
import { AppError } from '@tes/core';
import { markRoute } from '../access-log';

/** A route as the table sees it: an HTTP method and an OpenAPI path template. */
export interface RouteKey {
  method: 'get' | 'post' | 'delete';
  /** OpenAPI path template: literal segments and `{name}` parameters ('/tools/{tool}'). */
  path: string;
}

const PARAM = /^\{([A-Za-z0-9_]+)\}$/;

function segmentsOf(template: string): string[] {
  return template.split('/').slice(1);
}

/** Express's spelling of a template ('/tools/{tool}' → '/tools/:tool'), for its router and the metrics' route label. */
export function expressPath(template: string): string {
  return template.replace(/\{([A-Za-z0-9_]+)\}/g, ':$1');
}

/**
 * Literal segments before parameters, so that registration order decides nothing: the
 * router takes the first route that matches, and of two templates that can match the same
 * path (same length) the one with a literal where the other has a parameter comes first
 * (OpenAPI 3.1 "Path Templating Matching": concrete paths win). '/tools/quote' therefore
 * precedes '/tools/{tool}'; a method the literal path lacks still reaches the parameterised
 * one (POST /tools/executions is a submit of the tool "executions").
 */
export function inMatchingOrder<R extends RouteKey>(routes: readonly R[]): R[] {
  return [...routes].sort((a, b) => {
    const x = segmentsOf(a.path);
    const y = segmentsOf(b.path);
    for (let i = 0; i < Math.min(x.length, y.length); i++) {
      const kind = Number(PARAM.test(x[i]!)) - Number(PARAM.test(y[i]!));
      if (kind !== 0) return kind;
    }
    return x.length - y.length;
  });
}

/**
 * Which methods the routes take for a concrete path: the 405's Allow header, and the refusal
 * of methods no route takes. Matches as Express 5's router does (path-to-regexp 8 with the
 * router's defaults): case-insensitive, one optional trailing slash, a parameter is one
 * non-empty segment that must percent-decode. The raw path is matched, so an encoded
 * letter never matches a literal segment.
 */
export class RouteTable {
  private readonly entries: { method: string; path: string; pattern: RegExp }[];
  private readonly everyMethod: ReadonlySet<string>;

  constructor(routes: readonly RouteKey[]) {
    this.entries = inMatchingOrder(routes).map((r) => ({ method: r.method.toUpperCase(), path: r.path, pattern: patternOf(r.path) }));
    this.everyMethod = new Set(this.entries.flatMap((e) => withHead(e.method)));
  }

  /**
   * The template of the first route, in matching order, whose path matches (whatever its
   * method): the route label of a request refused before or instead of its route (401, 429,
   * 405). Undefined for a path no route has.
   */
  templateOf(path: string): string | undefined {
    for (const e of this.entries) if (matches(e.pattern, path)) return e.path;
    return undefined;
  }

  /** Methods the path takes, sorted (GET brings HEAD); empty when no route matches it. */
  allowed(path: string): string[] {
    const into = new Set<string>();
    for (const e of this.entries) if (matches(e.pattern, path)) for (const m of withHead(e.method)) into.add(m);
    return [...into].sort();
  }

  /** Whether any route takes `method` (the others are refused before a body is read). */
  takes(method: string): boolean {
    return this.everyMethod.has(method);
  }

  /** 405 with Allow when some route has the path, else 404. */
  refusal(path: string, res: Response): AppError {
    const template = this.templateOf(path);
    if (template !== undefined) markRoute(res, template);
    const allowed = this.allowed(path);
    if (allowed.length === 0) return new AppError('route_not_found');
    res.set('Allow', allowed.join(', '));
    return new AppError('method_not_allowed', 'method_not_allowed', { details: { allowedMethods: allowed } });
  }
}

function withHead(method: string): string[] {
  return method === 'GET' ? ['GET', 'HEAD'] : [method];
}

/** A template's matcher: its pattern and its parameters' names, in order. */
export interface CompiledTemplate {
  pattern: RegExp;
  names: string[];
}

export function compileTemplate(template: string): CompiledTemplate {
  const names = segmentsOf(template).flatMap((s) => PARAM.exec(s)?.[1] ?? []);
  return { pattern: patternOf(template), names };
}

/**
 * The parameters of a path the pattern matched, percent-decoded as Express's router decodes
 * them; throws route_not_found for one that cannot be decoded (the router's answer too).
 */
export function paramsOf(template: CompiledTemplate, match: RegExpExecArray): Record<string, string> {
  const params: Record<string, string> = {};
  template.names.forEach((name, i) => {
    const raw = match[i + 1]!;
    try {
      params[name] = raw.includes('%') ? decodeURIComponent(raw) : raw;
    } catch {
      throw new AppError('route_not_found');
    }
  });
  return params;
}

function patternOf(template: string): RegExp {
  const source = segmentsOf(template)
    .map((s) => (PARAM.test(s) ? '([^/]+)' : s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
    .join('/');
  return new RegExp(`^/${source}/?$`, 'i');
}

function matches(pattern: RegExp, path: string): boolean {
  const m = pattern.exec(path);
  if (!m) return false;
  // the router refuses a parameter it cannot percent-decode: that path reaches no route
  for (const value of m.slice(1)) {
    if (!value.includes('%')) continue;
    try {
      decodeURIComponent(value);
    } catch {
      return false;
    }
  }
  return true;
}
