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

/** `--arg k=v …` into tool arguments; a key given twice is a usage error, not a silent overwrite. */
export function parseArguments(items: readonly string[] = []): Record<string, unknown> {
  const args: Record<string, unknown> = {};
  for (const item of items) {
    const [key, value] = splitAssignment(item, '--arg');
    if (FORBIDDEN_KEYS.has(key)) throw new UsageError(`--arg: ${key} is not an argument name`);
    if (Object.hasOwn(args, key)) throw new UsageError(`--arg ${key} is given twice`);
    args[key] = parseArgValue(value);
  }
  return args;
}

export interface FileArgument {
  field: string;
  path: string;
}

/** `--file field=path …`: each file is uploaded and its id passed as that argument. */
export function parseFiles(items: readonly string[] = [], args: Record<string, unknown> = {}): FileArgument[] {
  const seen = new Set<string>();
  return items.map((item) => {
    const [field, path] = splitAssignment(item, '--file');
    if (FORBIDDEN_KEYS.has(field)) throw new UsageError(`--file: ${field} is not an argument name`);
    if (path === '') throw new UsageError(`--file ${field}= needs a path`);
    if (seen.has(field) || Object.hasOwn(args, field)) throw new UsageError(`argument ${field} is given twice`);
    seen.add(field);
    return { field, path };
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
