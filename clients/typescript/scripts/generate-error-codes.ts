import { writeFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { ERROR_TABLE, type ErrorCodeFacts } from '@tes/core';

/**
 * Writes what the clients need of the API's error codes from their one owner, libs/core's
 * ERROR_TABLE (`npm run generate:errors`): the SDK's code list, the Python client's, and the
 * console's one line per code. The clients cannot import libs/core (the SDK and the Python
 * package are published alone; the console is a browser bundle), so they get a generated
 * copy, as the tool types are (generate-tool-types.ts). test/error-codes.test.ts fails when a
 * file is stale. The sentences with amounts (error-words.ts, _words.py, the CLI's
 * describe-error) stay hand-written: they read details no table holds.
 */

type Table = Readonly<Record<string, ErrorCodeFacts>>;

const FROM = "libs/core's ERROR_TABLE (libs/core/src/errors.ts) by `npm run generate:errors`";

/** The files it writes, relative to the repository root. */
export const ERROR_CODE_FILES = {
  sdk: 'clients/typescript/src/error-codes.ts',
  python: 'clients/python/tes_client/_error_codes.py',
  console: 'clients/console/src/ui/error-descriptions.ts',
} as const;

const tsString = (s: string): string => `'${s.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;

function renderSdk(table: Table): string {
  const codes = Object.keys(table)
    .map((c) => `  ${tsString(c)},\n`)
    .join('');
  return (
    `/** GENERATED from ${FROM}; do not edit. */\n\n` +
    `/** Every \`error.message\` code the API answers with (docs/api.md#errors). */\n` +
    `export const ERROR_CODES = [\n${codes}] as const;\n\n` +
    `export type ErrorCode = (typeof ERROR_CODES)[number];\n`
  );
}

function renderPython(table: Table): string {
  const codes = Object.keys(table)
    .map((c) => `    ${JSON.stringify(c)},\n`)
    .join('');
  return (
    `"""GENERATED from ${FROM.replace(/`/g, '``')}; do not edit."""\n\n` +
    `#: Every \`\`error.message\`\` code the API answers with (docs/api.md#errors).\n` +
    `ERROR_CODES = (\n${codes})\n`
  );
}

function renderConsole(table: Table): string {
  const lines = Object.entries(table)
    .map(([code, facts]) => `  ${code}: ${tsString(facts.description)},\n`)
    .join('');
  return (
    `/** GENERATED from ${FROM}; do not edit. */\n\n` +
    `/** What each API error code means for the person at the console, in words. */\n` +
    `export const ERROR_DESCRIPTIONS: Readonly<Record<string, string>> = {\n${lines}};\n`
  );
}

/** Each generated file's text, by its path from the repository root. */
export function renderErrorCodeFiles(table: Table = ERROR_TABLE): Record<string, string> {
  return {
    [ERROR_CODE_FILES.sdk]: renderSdk(table),
    [ERROR_CODE_FILES.python]: renderPython(table),
    [ERROR_CODE_FILES.console]: renderConsole(table),
  };
}

if (require.main === module) {
  const root = resolve(process.argv[2] ?? '.');
  Promise.all(
    Object.entries(renderErrorCodeFiles()).map(async ([path, text]) => {
      await writeFile(resolve(root, path), text);
      process.stdout.write(`wrote ${path}\n`);
    }),
  ).catch((err: unknown) => {
    process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
    process.exitCode = 1;
  });
}
