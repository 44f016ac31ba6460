import type { Json, JsonObject } from './schema';

/** What a snippet runs: the form as it stands and the quote the console got for it. */
export interface SnippetInput {
  /** The API's origin, the page's own (location.origin). */
  baseUrl: string;
  tool: string;
  args: JsonObject;
  priceVersion: string;
  maximumChargeMicros: number;
  /** Sent by the curl snippet, so pasting it twice returns the first execution instead of paying twice. */
  idempotencyKey: string;
}

export type SnippetLanguage = 'curl' | 'typescript' | 'python';

/**
 * The form as code a caller pastes: curl against the HTTP API, the TypeScript SDK
 * (clients/typescript) and the Python client (clients/python). The key is never written into the
 * code: each reads TES_API_KEY, as the SDKs and the CLI do. A browser test runs all three.
 */
export function snippet(language: SnippetLanguage, input: SnippetInput): string {
  switch (language) {
    case 'curl':
      return curl(input);
    case 'typescript':
      return typescript(input);
    case 'python':
      return python(input);
  }
}

/** One request with the quote's priceVersion and maximum, answered when the run ends (≤ 60 s). */
function curl(input: SnippetInput): string {
  const body = JSON.stringify({ tool: input.tool, arguments: input.args, priceVersion: input.priceVersion, maximumChargeMicros: input.maximumChargeMicros });
  return [
    `# Prices ${input.priceVersion}: quote again (POST /tools/quote) once they change. The same`,
    '# Idempotency-Key returns the same execution; give a new one to run again.',
    `curl -sS --fail-with-body -X POST ${shellQuote(`${input.baseUrl}/tools/${input.tool}`)} \\`,
    '  -H "Authorization: Bearer $TES_API_KEY" \\',
    "  -H 'Content-Type: application/json' \\",
    `  -H ${shellQuote(`Idempotency-Key: ${input.idempotencyKey}`)} \\`,
    "  -H 'Prefer: wait=60' \\",
    `  -d ${shellQuote(body)}`,
  ].join('\n');
}

/** tes.run quotes at run time (so the prices are always current) and refuses above the shown maximum. */
function typescript(input: SnippetInput): string {
  return [
    "import { writeFile } from 'node:fs/promises';",
    "import { TesClient } from '@tes/client';",
    '',
    '// export TES_API_KEY=tes_…',
    `const tes = new TesClient({ apiKey: process.env.TES_API_KEY!, baseUrl: ${JSON.stringify(input.baseUrl)} });`,
    '',
    `const { execution, artifacts } = await tes.run(${tsString(input.tool)}, ${literal(input.args, 'ts', '')}, {`,
    `  maximumChargeMicros: ${input.maximumChargeMicros}, // a higher quote is refused, unsubmitted`,
    '});',
    'console.log(execution.id, execution.status, execution.chargedMicros);',
    'for (const a of artifacts) await writeFile(`${a.id}.${a.format}`, await a.download());',
  ].join('\n');
}

function python(input: SnippetInput): string {
  return [
    'import os',
    'from tes_client import TesClient',
    '',
    '# export TES_API_KEY=tes_…',
    `tes = TesClient(os.environ["TES_API_KEY"], ${JSON.stringify(input.baseUrl)})`,
    'result = tes.run(',
    `    ${JSON.stringify(input.tool)},`,
    `    ${literal(input.args, 'py', '    ')},`,
    `    maximum_charge_micros=${input.maximumChargeMicros},  # a higher quote is refused, unsubmitted`,
    ')',
    'execution = result.execution',
    'print(execution["id"], execution["status"], execution["chargedMicros"])',
    'for artifact in result.artifacts:',
    '    print(artifact.download_to("."))',
  ].join('\n');
}

/** A shell word in single quotes: nothing inside is expanded ($, `, \ and " stay as typed). */
function shellQuote(text: string): string {
  return `'${text.replace(/'/g, `'\\''`)}'`;
}

function tsString(text: string): string {
  return `'${JSON.stringify(text).slice(1, -1).replace(/\\"/g, '"').replace(/'/g, "\\'")}'`;
}

/**
 * A JSON value as a TypeScript or Python literal, indented. JSON's string escapes are valid
 * in both languages; only true/false/null differ in Python, and TypeScript keys are bare
 * where they can be.
 */
function literal(value: Json, lang: 'ts' | 'py', indent: string): string {
  if (value === null) return lang === 'py' ? 'None' : 'null';
  if (typeof value === 'boolean') return lang === 'py' ? (value ? 'True' : 'False') : String(value);
  if (typeof value === 'number') return String(value);
  if (typeof value === 'string') return lang === 'ts' ? tsString(value) : JSON.stringify(value);
  const inner = `${indent}  `;
  if (Array.isArray(value)) {
    if (value.length === 0) return '[]';
    return `[\n${value.map((v) => `${inner}${literal(v, lang, inner)},`).join('\n')}\n${indent}]`;
  }
  const entries = Object.entries(value);
  if (entries.length === 0) return '{}';
  const key = (k: string) => (lang === 'ts' && /^[A-Za-z_$][\w$]*$/.test(k) ? k : JSON.stringify(k));
  return `{\n${entries.map(([k, v]) => `${inner}${key(k)}: ${literal(v, lang, inner)},`).join('\n')}\n${indent}}`;
}
