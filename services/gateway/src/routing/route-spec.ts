import type { Request, RequestHandler, Response } from 'express';
import type { Scope } from '@tes/core';
import type { AuthContext } from '../context';
import type { CompiledOperation } from './request-schemas';

/** What a route's handler receives: the caller, and its body and query checked against openapi.json. */
export interface RouteContext<B, Q> {
  req: Request;
  res: Response;
  auth: AuthContext;
  /** The body, conforming to the operation's request body schema (undefined when it declares none). */
  body: B;
  /** The query, conforming to the operation's query parameters (the parsed query when it declares none). */
  query: Q;
}

/**
 * How a route's body is read. Every body is refused unless it is JSON, before anything is
 * parsed and before the scope is checked.
 * - 'json': read up to `bodyLimitBytes` (64 KiB by default) before the scope check (413
 *   request_too_large past it), and checked against the operation's request body schema;
 * - 'none': the operation declares no body; one sent anyway is read like a 'json' one and
 *   ignored;
 * - 'upload': read by the route itself, after the scope check and `admit`, up to
 *   `bodyLimitBytes`, then checked like a 'json' one.
 */
export type BodyReading = 'json' | 'none' | 'upload';

/** An endpoint that takes an API key (every one under /tools). */
export interface KeyRoute<B = unknown, Q = unknown> {
  method: 'get' | 'post' | 'delete';
  /** The OpenAPI path template; the operation there supplies the request schemas. */
  path: string;
  /** The operation's operationId, checked against the document at start. */
  operationId: string;
  /** The scope the key needs (the operation's x-required-scope, checked at start). */
  scope: Scope;
  body: BodyReading;
  bodyLimitBytes?: number;
  /** 'upload' only: runs before the body is read (a refusal here costs no body reading). */
  admit?: RequestHandler;
  /**
   * Refusals that outrank the body's shape: run after the scope check, before the query and
   * the body are checked. `operation` checks header parameters against the document; `auth`
   * is the caller (a role the route requires outranks the body's shape too).
   */
  precheck?(req: Request, operation: CompiledOperation, auth: AuthContext): void;
  handle(ctx: RouteContext<B, Q>): Promise<void>;
}

/** An endpoint anyone may read (the operation's `security: []`): the document and its pages. */
export interface PublicRoute {
  method: 'get';
  path: string;
  operationId: string;
  scope: 'public';
  handle(req: Request, res: Response): void;
}

export type RouteSpec = KeyRoute | PublicRoute;
