import { AppError } from '@tes/core';

/** Deeper JSON than this is refused: canonicalisation and cloning recurse on it. */
const MAX_JSON_DEPTH = 64;

/**
 * Refuses a parsed body (and query) that nests deeper than MAX_JSON_DEPTH or holds text
 * Postgres cannot store (NUL, unpaired surrogates), on every route, rather than failing later
 * inside a transaction. Throws invalid_request.
 */
export function checkStorable(body: unknown, query: unknown): void {
  if (tooDeep(body, 0)) {
    throw new AppError('invalid_request', 'invalid_request', { details: { message: `JSON nested deeper than ${MAX_JSON_DEPTH} levels` } });
  }
  const where = unstorableText(body, '') ?? unstorableText(query, '?');
  if (where !== undefined) {
    throw new AppError('invalid_request', 'invalid_request', {
      details: { instancePath: where, message: 'text must not contain NUL characters or unpaired surrogates' },
    });
  }
}

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
      const found =
        unstorableText(k, `${path}/${k.replace(/[^\x20-\x7e]/g, '?')}`, depth + 1) ??
        unstorableText(v, `${path}/${k.replace(/[^\x20-\x7e]/g, '?')}`, depth + 1);
      if (found !== undefined) return found;
    }
  }
  return undefined;
}
