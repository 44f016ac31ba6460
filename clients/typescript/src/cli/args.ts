/** A mistake in how the CLI was called: exit status 2, and the command's usage is shown. */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

/**
 * The value of `--arg k=v`: JSON when it parses (numbers, booleans, null, arrays, objects,
 * "quoted strings"), else the text itself. So `--arg width=800` is the number 800 and
 * `--arg text=Hello` the string "Hello"; `--arg 'text="2026"'` forces a string.
 */
export function parseArgValue(raw: string): unknown {
  try {
    return JSON.parse(raw) as unknown;
  } catch {
    return raw;
  }
}

function splitAssignment(item: string, flag: string): [string, string] {
  const eq = item.indexOf('=');
  if (eq <= 0) throw new UsageError(`${flag} expects key=value, got ${JSON.stringify(item)}`);
  return [item.slice(0, eq), item.slice(eq + 1)];
}

const FORBIDDEN_KEYS = new Set(['__proto__', 'constructor', 'prototype']);

/** One step of an argument path: a property name or an array index. */
export type PathSegment = string | number;

/**
 * `slides[1].fileId` -> ['slides', 1, 'fileId']. Names are letters, digits and `_`; indexes
 * are decimal. Anything else is a usage error naming the path, before any upload.
 */
export function parsePath(path: string, flag: string): PathSegment[] {
  const segments: PathSegment[] = [];
  const re = /\[(\d+)\]|(^|\.)([A-Za-z_][A-Za-z0-9_]*)/y;
  let at = 0;
  while (at < path.length) {
    re.lastIndex = at;
    const m = re.exec(path);
    if (!m || (m[2] === '.' && segments.length === 0) || (m[2] === '' && segments.length > 0)) {
      throw new UsageError(`${flag} ${path}: not an argument path (like text, crop.width or slides[1].fileId)`);
    }
    const segment = m[1] !== undefined ? Number(m[1]) : m[3]!;
    if (typeof segment === 'string' && FORBIDDEN_KEYS.has(segment)) throw new UsageError(`${flag}: ${segment} is not an argument name`);
    segments.push(segment);
    at = re.lastIndex;
  }
  if (segments.length === 0 || typeof segments[0] !== 'string') throw new UsageError(`${flag} ${path}: not an argument path`);
  return segments;
}

function show(segments: readonly PathSegment[]): string {
  return segments.map((s, i) => (typeof s === 'number' ? `[${s}]` : i === 0 ? s : `.${s}`)).join('');
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * Puts `value` at `segments` inside `args`, making the objects and arrays on the way. A path
 * given twice, or one through a value that is not an object or array, is a usage error; an
 * array index may be at most one past the end (`slides[0]` before `slides[1]`, or an array given
 * whole with --arg), so no array ever has a hole.
 */
export function setPath(args: Record<string, unknown>, segments: readonly PathSegment[], value: unknown, flag: string): void {
  let container: Record<string, unknown> | unknown[] = args;
  for (let i = 0; i < segments.length; i++) {
    const key = segments[i]!;
    const last = i === segments.length - 1;
    const here = show(segments.slice(0, i + 1));
    if (typeof key === 'number' ? !Array.isArray(container) : Array.isArray(container)) {
      throw new UsageError(`${flag} ${show(segments)}: ${show(segments.slice(0, i))} is ${Array.isArray(container) ? 'an array' : 'an object'}`);
    }
    if (Array.isArray(container) && (key as number) > container.length) {
      throw new UsageError(
        `${flag} ${show(segments)}: ${here} would leave a gap (the array has ${container.length} item${container.length === 1 ? '' : 's'} so far)`,
      );
    }
    const parent: Record<string, unknown> | unknown[] = container;
    const current: unknown = Array.isArray(parent) ? parent[key as number] : Object.hasOwn(parent, key) ? parent[key as string] : undefined;
    if (last) {
      if (current !== undefined) throw new UsageError(`argument ${here} is given twice`);
      if (Array.isArray(parent)) parent[key as number] = value;
      else parent[key as string] = value;
      return;
    }
    if (current === undefined) {
      const made: Record<string, unknown> | unknown[] = typeof segments[i + 1] === 'number' ? [] : {};
      if (Array.isArray(parent)) parent[key as number] = made;
      else parent[key as string] = made;
      container = made;
    } else if (isObject(current) || Array.isArray(current)) {
      container = current;
    } else {
      throw new UsageError(`${flag} ${show(segments)}: ${here} is already ${JSON.stringify(current)}, not an object or array`);
    }
  }
}

/**
 * `--arg k=v …` into tool arguments. `k` may be a path into nested objects and arrays
 * (`resize.width=256`, `slides[0].text=Hi`); a path given twice is a usage error, not a
 * silent overwrite.
 */
export function parseArguments(items: readonly string[] = []): Record<string, unknown> {
  const args: Record<string, unknown> = {};
  for (const item of items) {
    const [key, value] = splitAssignment(item, '--arg');
    setPath(args, parsePath(key, '--arg'), parseArgValue(value), '--arg');
  }
  return args;
}

export interface FileArgument {
  /** The argument path as written (`slides[1].fileId`). */
  field: string;
  segments: PathSegment[];
  path: string;
}

/**
 * `--file field=path …`: each file is uploaded and its id put at that argument path
 * (`fileId`, `soundtrackFileId`, `slides[1].fileId`). Checked against the --arg values now,
 * with a placeholder, so a clash or a gap is reported before anything is uploaded.
 */
export function parseFiles(items: readonly string[] = [], args: Record<string, unknown> = {}): FileArgument[] {
  const trial = structuredClone(args);
  return items.map((item) => {
    const [field, path] = splitAssignment(item, '--file');
    const segments = parsePath(field, '--file');
    if (path === '') throw new UsageError(`--file ${field}= needs a path`);
    setPath(trial, segments, 'file_', '--file');
    return { field, segments, path };
  });
}

/** A positive integer option such as --limit. */
export function parseIntegerOption(value: string | undefined, flag: string, min: number, max: number): number | undefined {
  if (value === undefined) return undefined;
  if (!/^\d+$/.test(value) || Number(value) < min || Number(value) > max) {
    throw new UsageError(`${flag} must be an integer from ${min} to ${max}, got ${JSON.stringify(value)}`);
  }
  return Number(value);
}
