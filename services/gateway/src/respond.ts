import type { Response } from 'express';

/**
 * A JSON answer written straight to Node's response, as Express's res.json would write it
 * (`application/json; charset=utf-8`, Content-Length, no ETag: the app disables them, and no
 * answer here is cacheable) without its per-call settings lookups, charset parsing and
 * freshness check. Used on the hot paths (the poll, the submit, the error envelope).
 */
export function sendJson(res: Response, status: number, value: unknown): void {
  const text = JSON.stringify(value);
  res.statusCode = status;
  res.setHeader('Content-Type', 'application/json; charset=utf-8');
  res.setHeader('Content-Length', Buffer.byteLength(text));
  res.end(text);
}
