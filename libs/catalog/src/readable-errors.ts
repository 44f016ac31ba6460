import type { ErrorObject } from 'ajv';

/** One entry of details.errors: ajv's own fields (the contract), plus the problem in words. */
export interface ReportedError {
  instancePath: string;
  keyword: string;
  message: string;
  params: Record<string, unknown>;
  hint: string;
}

type Json = Record<string, unknown>;

const MAX_REPORTED_ERRORS = 20;
/** Edits (with a swap of neighbours as one) within which a name counts as a misspelling. */
const MAX_SUGGESTION_DISTANCE = 2;

/**
 * ajv's errors as people read them (issue #29). ajv with allErrors reports every failing branch
 * of a oneOf: `{"txt":"x"}` against image.render gave "must have required property 'svg'",
 * "… 'text'", "must match exactly one schema in oneOf" and "must NOT have additional
 * properties", without naming txt. Here:
 * - an unknown property names its path and the nearest known one ("did you mean text?"), and
 *   the required property (or oneOf choice) it misspells is not reported again;
 * - a oneOf/anyOf whose branches only require properties becomes one line, "needs one of svg or
 *   text" (none given) or "takes only one of svg or text" (several);
 * - `if` ("must match "else" schema") is dropped: the error inside it says what is wrong.
 * The entries keep ajv's instancePath, keyword, message and params, which callers match on.
 */
export function readableErrors(errors: readonly ErrorObject[], schema: object, data: unknown, subject: string): { errors: ReportedError[]; hint: string } {
  const dropped = new Set<ErrorObject>();
  const params = new Map<ErrorObject, Json>();
  const hints = new Map<ErrorObject, string>();

  for (const e of errors) {
    if (e.keyword !== 'oneOf' && e.keyword !== 'anyOf') continue;
    const branches = at(schema, e.schemaPath);
    const required = Array.isArray(branches) ? branches.map((b) => requiredOnly(b)) : [];
    if (required.length === 0 || required.some((r) => r === undefined)) continue;
    const names = [...new Set(required.flat() as string[])];
    const inside = errors.filter((x) => x !== e && x.schemaPath.startsWith(`${e.schemaPath}/`));
    for (const x of inside) dropped.add(x);
    params.set(e, { ...e.params, [`${e.keyword}Required`]: names });
    const none = e.params.passingSchemas === null || e.keyword === 'anyOf';
    hints.set(e, `${fieldPath(e.instancePath)} ${none ? 'needs' : 'takes only'} one of ${orList(names)}`);
  }

  for (const e of errors) {
    if (e.keyword !== 'additionalProperties' || typeof e.params.additionalProperty !== 'string') continue;
    const name = e.params.additionalProperty;
    const owner = at(schema, e.schemaPath.replace(/\/additionalProperties$/, ''));
    const known = isJson(owner) && isJson(owner.properties) ? Object.keys(owner.properties) : [];
    const present = at(data, `#${e.instancePath}`);
    const free = known.filter((k) => !(isJson(present) && k in present));
    const suggestion = nearest(name, free);
    const where = e.instancePath === '' ? subject : fieldPath(e.instancePath);
    const field = fieldPath(`${e.instancePath}/${escape(name)}`);
    if (suggestion === undefined) {
      hints.set(e, `${field} is not a property of ${where}${known.length > 0 ? ` (its properties: ${known.join(', ')})` : ''}`);
      continue;
    }
    params.set(e, { ...e.params, suggestion });
    hints.set(e, `${field} is not a property of ${where}; did you mean ${suggestion}?`);
    // The misspelt property is what was missing: saying so again would contradict the suggestion.
    for (const x of errors) {
      if (x.instancePath !== e.instancePath) continue;
      if (x.keyword === 'required' && x.params.missingProperty === suggestion) dropped.add(x);
      const choice = params.get(x);
      if (choice && Object.keys(choice).some((k) => k.endsWith('Required') && (choice[k] as string[]).includes(suggestion))) dropped.add(x);
    }
  }

  const kept = errors.filter((e) => !dropped.has(e) && !(e.keyword === 'if' && errors.length > 1));
  const reported = kept.slice(0, MAX_REPORTED_ERRORS).map((e) => ({
    instancePath: e.instancePath,
    keyword: e.keyword,
    message: e.message ?? e.keyword,
    params: params.get(e) ?? (e.params as Json),
    hint: hints.get(e) ?? plainHint(e),
  }));
  return { errors: reported, hint: reported.map((r) => r.hint).join('; ') };
}

/** ajv's message after the field's path, with what an enum allows and what is missing. */
function plainHint(e: ErrorObject): string {
  if (e.keyword === 'required' && typeof e.params.missingProperty === 'string') {
    return `${fieldPath(`${e.instancePath}/${escape(e.params.missingProperty)}`)} is required`;
  }
  if (e.keyword === 'enum' && Array.isArray(e.params.allowedValues)) {
    return `${fieldPath(e.instancePath)} must be one of ${e.params.allowedValues.map(String).join(', ')}`;
  }
  return `${fieldPath(e.instancePath)} ${e.message ?? `fails ${e.keyword}`}`;
}

/** The properties a branch requires, when requiring them is all it does. */
function requiredOnly(branch: unknown): string[] | undefined {
  if (!isJson(branch) || !Array.isArray(branch.required)) return undefined;
  return Object.keys(branch).every((k) => k === 'required' || k === 'description') ? (branch.required as string[]) : undefined;
}

/** The closest candidate within MAX_SUGGESTION_DISTANCE edits (case ignored), if one is clearly closest. */
function nearest(name: string, candidates: readonly string[]): string | undefined {
  const scored = candidates.map((c) => ({ c, d: distance(name.toLowerCase(), c.toLowerCase()) })).sort((a, b) => a.d - b.d);
  const best = scored[0];
  if (!best || best.d > Math.min(MAX_SUGGESTION_DISTANCE, Math.max(1, name.length - 2))) return undefined;
  return scored[1]?.d === best.d ? undefined : best.c;
}

/** Optimal string alignment distance: insertions, deletions, substitutions and swaps of neighbours. */
function distance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) => Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)));
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const row = d[i]!;
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      row[j] = Math.min(d[i - 1]![j]! + 1, row[j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) row[j] = Math.min(row[j]!, d[i - 2]![j - 2]! + 1);
    }
  }
  return d[a.length]![b.length]!;
}

/** A JSON pointer as the caller wrote it: /slides/0/txt -> arguments.slides[0].txt. */
function fieldPath(pointer: string): string {
  const tokens = pointer
    .split('/')
    .slice(1)
    .map((t) => t.replace(/~1/g, '/').replace(/~0/g, '~'));
  return tokens.reduce((path, t) => (/^\d+$/.test(t) ? `${path}[${t}]` : `${path}.${t}`), 'arguments');
}

function escape(token: string): string {
  return token.replace(/~/g, '~0').replace(/\//g, '~1');
}

/** The value at a JSON pointer (`#/a/b` or `/a/b`), or undefined. */
function at(root: unknown, pointer: string): unknown {
  const tokens = pointer.replace(/^#/, '').split('/').slice(1);
  let node = root;
  for (const raw of tokens) {
    const t = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    if (Array.isArray(node)) node = node[Number(t)];
    else if (isJson(node)) node = node[t];
    else return undefined;
  }
  return node;
}

function orList(names: readonly string[]): string {
  return names.length <= 1 ? (names[0] ?? '') : `${names.slice(0, -1).join(', ')} or ${names[names.length - 1]}`;
}

function isJson(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
