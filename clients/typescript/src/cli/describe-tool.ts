import type { Catalog, Tool } from '../types';
import { wrap } from './format';

type Schema = Record<string, unknown>;

const FILE_ID_PATTERN = '^file_';
const HEX_COLOR_PATTERN = '^#[0-9a-fA-F]{6}$';

function isSchema(v: unknown): v is Schema {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** One row of the arguments table. */
interface Row {
  path: string;
  required: boolean;
  type: string;
  notes: string;
}

const show = (v: unknown): string => (typeof v === 'string' ? v : JSON.stringify(v));

function range(min: unknown, max: unknown, exclusiveMin: unknown, unit = ''): string {
  const lo = typeof exclusiveMin === 'number' ? `>${exclusiveMin}` : typeof min === 'number' ? String(min) : undefined;
  const hi = typeof max === 'number' ? String(max) : undefined;
  if (lo !== undefined && hi !== undefined) return ` ${lo.startsWith('>') ? `${lo}, ≤${hi}` : `${lo}-${hi}`}${unit}`;
  if (lo !== undefined) return ` ${lo.startsWith('>') ? lo : `≥${lo}`}${unit}`;
  if (hi !== undefined) return ` ≤${hi}${unit}`;
  return '';
}

/** The short type of a schema: `integer 16-4096`, `png | jpeg`, `file id`, `array of 1-20 objects`. */
function typeOf(s: Schema): string {
  if ('const' in s) return show(s.const);
  if (Array.isArray(s.enum)) {
    const values = s.enum.map(show).join(' | ');
    return values.length <= 48 ? values : `one of ${s.enum.length} values`;
  }
  switch (s.type) {
    case 'string':
      if (typeof s.pattern === 'string' && s.pattern.startsWith(FILE_ID_PATTERN)) return 'file id';
      if (s.pattern === HEX_COLOR_PATTERN) return 'colour #rrggbb';
      return `text${range(s.minLength, s.maxLength, undefined, ' chars')}`;
    case 'integer':
    case 'number':
      return `${s.type === 'integer' && s.multipleOf === 2 ? 'even integer' : s.type}${range(s.minimum, s.maximum, s.exclusiveMinimum)}`;
    case 'boolean':
      return 'true | false';
    case 'array': {
      const items = isSchema(s.items) ? s.items : {};
      const what =
        items.type === 'object' ? 'objects' : items.type === 'integer' || items.type === 'number' ? 'numbers' : items.type === 'string' ? 'texts' : 'items';
      const count = range(s.minItems, s.maxItems, undefined).trim();
      return `array of ${count ? `${count} ` : ''}${what}`;
    }
    case 'object':
      return 'object';
    default:
      return Array.isArray(s.type) ? s.type.join(' | ') : 'any';
  }
}

/** The description, the values of a long enum (unless a condition below lists them), the default. */
function notesOf(s: Schema, valuesListedBelow: boolean): string {
  const parts: string[] = [];
  if (typeof s.description === 'string') parts.push(s.description);
  if (Array.isArray(s.enum) && typeOf(s).startsWith('one of') && !valuesListedBelow) parts.push(`Values: ${s.enum.map(show).join(', ')}.`);
  if (s.default !== undefined) parts.push(`Default ${show(s.default)}.`);
  if (typeof s.pattern === 'string' && s.pattern.startsWith(FILE_ID_PATTERN)) parts.push('(--file uploads a file for it.)');
  return parts.join(' ');
}

/** The rows of an object's properties, nested objects and array items flattened (`slides[].text`). */
function rows(s: Schema, prefix: string, out: Row[], notes: string[]): void {
  const properties = isSchema(s.properties) ? s.properties : {};
  const required = Array.isArray(s.required) ? s.required.map(String) : [];
  if (Array.isArray(s.oneOf)) {
    const groups = s.oneOf.map((b) => (isSchema(b) && Array.isArray(b.required) ? b.required.map(String).join(' + ') : '?'));
    notes.push(`${prefix ? `Each of ${prefix}: exactly` : 'Exactly'} one of ${groups.join(', ')}.`);
  }
  if (isSchema(s.dependentRequired)) {
    for (const [k, v] of Object.entries(s.dependentRequired))
      notes.push(`${prefix ? `${prefix}.` : ''}${k} only with ${Array.isArray(v) ? v.map(String).join(', ') : '?'}.`);
  }
  const cond = isSchema(s.if) && isSchema(s.if.properties) ? s.if.properties : undefined;
  if (cond) {
    const [name, test] = Object.entries(cond)[0] ?? [];
    const values = (branch: unknown): string =>
      isSchema(branch) && isSchema(branch.properties)
        ? Object.entries(branch.properties)
            .map(([k, v]) => `${k} ${isSchema(v) && Array.isArray(v.enum) ? `is one of ${v.enum.map(show).join(', ')}` : 'differs'}`)
            .join('; ')
        : '';
    if (name && isSchema(test) && 'const' in test) notes.push(`When ${name} is ${show(test.const)}: ${values(s.then)}. Otherwise: ${values(s.else)}.`);
  }
  const branchProps = (b: unknown): string[] => (isSchema(b) && isSchema(b.properties) ? Object.keys(b.properties) : []);
  const conditioned = new Set(cond ? [...branchProps(s.then), ...branchProps(s.else)] : []);
  for (const [name, prop] of Object.entries(properties)) {
    if (!isSchema(prop)) continue;
    const path = prefix ? `${prefix}.${name}` : name;
    out.push({ path, required: required.includes(name), type: typeOf(prop), notes: notesOf(prop, conditioned.has(name)) });
    if (prop.type === 'object') rows(prop, path, out, notes);
    if (prop.type === 'array' && isSchema(prop.items) && prop.items.type === 'object') rows(prop.items, `${path}[]`, out, notes);
  }
}

/** A shell word: bare when safe, else in single quotes. */
function shellWord(s: string): string {
  return /^[\w@%+=:,./[\]-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`;
}

/**
 * The example as a command line: `--arg` per leaf (paths into objects and arrays), `--file` for
 * file ids (with a made-up file name), so it can be copied and edited.
 */
export function exampleCommand(tool: string, example: Record<string, unknown>, width = Infinity): string {
  const words = ['tes', 'run', tool];
  const walk = (v: unknown, path: string): void => {
    if (Array.isArray(v) && v.length > 0 && v.every((x) => typeof x === 'object' && x !== null && !Array.isArray(x))) {
      v.forEach((x, i) => walk(x, `${path}[${i}]`));
    } else if (isSchema(v) && path !== '') {
      for (const [k, x] of Object.entries(v)) walk(x, `${path}.${k}`);
    } else if (isSchema(v)) {
      for (const [k, x] of Object.entries(v)) walk(x, k);
    } else if (typeof v === 'string' && /^file_[0-9A-Z]{26}$/.test(v)) {
      words.push('--file', shellWord(`${path}=${sampleFile(tool, path)}`));
    } else {
      // Text that would parse as JSON (a number, true) is quoted so it stays text.
      const raw = typeof v === 'string' && !isJsonText(v) ? v : JSON.stringify(v);
      words.push('--arg', shellWord(`${path}=${raw}`));
    }
  };
  walk(example, '');
  // Flag and value stay together; lines past the width continue after a backslash.
  const pieces = ['tes run ' + tool];
  for (let i = 3; i < words.length; i += 2) pieces.push(`${words[i]} ${words[i + 1] ?? ''}`);
  const lines: string[] = [];
  for (const piece of pieces) {
    const last = lines.at(-1);
    if (last !== undefined && last.length + 1 + piece.length + 2 <= width) lines[lines.length - 1] = `${last} ${piece}`;
    else lines.push(last === undefined ? piece : `    ${piece}`);
  }
  return lines.join(' \\\n');
}

/** A made-up file name for a file id in an example: what kind of file goes there. */
function sampleFile(tool: string, path: string): string {
  if (/soundtrack|audio/i.test(path) || tool.startsWith('audio.')) return 'sound.wav';
  if (tool.startsWith('video.') && !path.startsWith('slides')) return 'clip.mp4';
  return 'picture.png';
}

function isJsonText(v: string): boolean {
  try {
    JSON.parse(v);
    return true;
  } catch {
    return false;
  }
}

/** `tes tools NAME`: what the tool does, its price and models, its arguments as a table, and its example. */
export function describeTool(tool: Tool, catalog: Pick<Catalog, 'priceVersion'>, columns: number): string {
  const width = Math.max(60, Math.min(columns, 120));
  const out: string[] = [];
  out.push(`${tool.name}  (${tool.category}, ${tool.available ? 'available' : 'NOT available now'})`);
  out.push(...wrap(tool.description, width));
  out.push('');
  out.push(...wrap(`Price: ${tool.price?.description ?? 'not priced'} (price version ${catalog.priceVersion}; tes quote gives the exact maximum)`, width));
  out.push('');
  const table: Row[] = [];
  const notes: string[] = [];
  rows(tool.inputSchema, '', table, notes);
  out.push('Arguments (* required; inside an object: when the object is given):');
  const pathWidth = Math.max(...table.map((r) => r.path.length + 1));
  const typeWidth = Math.min(28, Math.max(...table.map((r) => r.type.length)));
  const noteWidth = width - 2 - pathWidth - 2 - typeWidth - 2;
  for (const r of table) {
    const head = `  ${(r.path + (r.required ? '*' : '')).padEnd(pathWidth)}  ${r.type.padEnd(typeWidth)}  `;
    const lines = noteWidth >= 30 ? wrap(r.notes, noteWidth) : [];
    // A type wider than its column takes the line; the notes start below it, in their column.
    const indent = ' '.repeat(2 + pathWidth + 2 + typeWidth + 2);
    if (r.type.length > typeWidth) out.push(head.trimEnd(), ...lines.map((l) => `${indent}${l}`));
    else out.push(`${head}${lines[0] ?? ''}`.trimEnd(), ...lines.slice(1).map((l) => `${indent}${l}`));
    if (noteWidth < 30 && r.notes) for (const l of wrap(r.notes, width - 6)) out.push(`      ${l}`);
  }
  for (const n of notes) for (const [i, l] of wrap(n, width - 4).entries()) out.push(`${i === 0 ? '  ' : '    '}${l}`);
  out.push('');
  out.push('Models:');
  const idWidth = Math.max(...tool.models.map((m) => m.id.length));
  for (const m of tool.models) {
    out.push(`  ${m.id.padEnd(idWidth)}  ${m.available ? 'available    ' : 'not available'}  ${m.price?.description ?? 'not priced'}`);
    for (const l of wrap(m.description, width - idWidth - 4)) out.push(`  ${' '.repeat(idWidth)}  ${l}`);
  }
  out.push('');
  out.push('Example:');
  out.push(
    ...exampleCommand(tool.name, tool.example, width - 2)
      .split('\n')
      .map((l) => `  ${l}`),
  );
  return out.join('\n') + '\n';
}
