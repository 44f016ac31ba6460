import { parseArgs } from 'node:util';
import type { Knex } from 'knex';
import { COMMANDS } from './commands';
import { UsageError, type CliSettings, type CommandSpec, type OptionSpec } from './spec';

export interface CliIo {
  out: (text: string) => void;
  err: (text: string) => void;
  /** stdout is a terminal: read commands print tables there, JSON anywhere else (the contract's "JSON on stdout" for scripts). */
  tty?: boolean;
}

const JSON_OPTION: OptionSpec = { description: 'print JSON (the default when stdout is not a terminal)', type: 'boolean' };
const TABLE_OPTION: OptionSpec = { description: 'print tables (the default on a terminal)', type: 'boolean' };

/** The options a command takes: its own, and --json/--table when it can print tables. */
function optionsOf(c: CommandSpec): Record<string, OptionSpec> {
  return c.render ? { ...c.options, json: JSON_OPTION, table: TABLE_OPTION } : c.options;
}

function commandHelp(c: CommandSpec): string {
  const options = optionsOf(c);
  const lines = [`usage: admin ${c.name}${c.positionals ? ` ${c.positionals}` : ''}${Object.keys(options).length ? ' [options]' : ''}`, '', c.summary, ''];
  for (const [name, o] of Object.entries(options)) {
    const flag = o.type === 'boolean' ? `--${name}` : `--${name} <value>`;
    lines.push(`  ${flag.padEnd(28)} ${o.description}${o.required ? ' (required)' : ''}`);
  }
  if (c.notes) lines.push('', ...c.notes);
  return lines.join('\n');
}

function generalHelp(): string {
  return [
    'usage: npm run admin -- <command> [options]',
    '',
    'commands:',
    ...COMMANDS.map((c) => `  ${c.name.padEnd(24)} ${c.summary}`),
    '',
    'Each command takes --help. Every command prints JSON on stdout for scripts; read commands',
    '(list, show) print tables instead when stdout is a terminal (--json and --table choose). Money is shown in micro-USD and in dollars (1 USD = 1000000 micros).',
    'When stdout goes to a file or a pipe, run npm with -s (npm run -s admin -- ...): npm prints its',
    '"> admin" banner on stdout, ahead of the JSON or CSV.',
    'Configuration comes from the environment (DATABASE_URL, ...).',
    'Exit status: 0 ok; 1 failed precondition (an unknown id, a state the command cannot act on,',
    'a price list changed since export; ledger audit: an invariant broken; models check: a model',
    'its provider disagrees on or that could not be checked); 2 bad usage.',
  ].join('\n');
}

/** Finds the command whose words start argv (longest first). */
function findCommand(argv: string[]): { command: CommandSpec; rest: string[] } | null {
  const sorted = [...COMMANDS].sort((a, b) => b.name.split(' ').length - a.name.split(' ').length);
  for (const c of sorted) {
    const words = c.name.split(' ');
    if (words.every((w, i) => argv[i] === w)) return { command: c, rest: argv.slice(words.length) };
  }
  return null;
}

function isAsyncIterable(value: unknown): value is AsyncIterable<string> {
  return typeof value === 'object' && value !== null && Symbol.asyncIterator in value;
}

function wantsTable(values: Record<string, string | boolean | undefined>, io: CliIo): boolean {
  if (values.json === true) return false;
  return values.table === true || io.tty === true;
}

/**
 * Runs one admin command. Returns the exit code. `connect` is called only for a valid
 * command (so --help and usage errors need no database).
 */
export async function runCli(argv: string[], connect: () => Knex, io: CliIo, settings: CliSettings = { webhookAllowPrivate: false }): Promise<number> {
  if (argv.length === 0 || argv[0] === '--help' || argv[0] === '-h' || argv[0] === 'help') {
    io.out(generalHelp());
    return argv.length === 0 ? 2 : 0;
  }
  const found = findCommand(argv);
  if (!found) {
    io.err(JSON.stringify({ error: `unknown command: ${argv.slice(0, 2).join(' ')}`, hint: 'run with --help for the list' }));
    return 2;
  }
  const { command, rest } = found;
  if (rest.includes('--help') || rest.includes('-h')) {
    io.out(commandHelp(command));
    return 0;
  }
  const options = optionsOf(command);
  let values: Record<string, string | boolean | undefined>;
  let positionals: string[];
  try {
    const parsed = parseArgs({
      args: rest,
      options: Object.fromEntries(Object.entries(options).map(([k, o]) => [k, { type: o.type ?? ('string' as const) }])),
      allowPositionals: command.positionals !== undefined,
      strict: true,
    });
    values = parsed.values;
    positionals = parsed.positionals;
    for (const [k, o] of Object.entries(options)) {
      if (o.required && (values[k] === undefined || values[k] === '')) throw new UsageError(`--${k} is required`);
    }
  } catch (err) {
    io.err(JSON.stringify({ error: (err as Error).message, usage: commandHelp(command) }));
    return 2;
  }
  const db = connect();
  try {
    const result = await command.run(db, values, positionals, (text) => io.err(`note: ${text}`), settings);
    if (typeof result === 'string') io.out(result);
    else if (isAsyncIterable(result)) for await (const chunk of result) io.out(chunk);
    else if (command.render && wantsTable(values, io)) io.out((command.render as (r: unknown) => string)(result));
    else io.out(JSON.stringify(result, null, 2));
    if (command.name === 'ledger audit' && !(result as { ok: boolean }).ok) return 1;
    if (command.failed?.(result)) return 1;
    return 0;
  } catch (err) {
    if (err instanceof UsageError) {
      io.err(JSON.stringify({ error: err.message, usage: commandHelp(command) }));
      return 2;
    }
    // Everything else is a failed precondition (a PreconditionError, or an AppError from @tes/db
    // such as an unknown project) or a failure (the database unreachable): exit 1.
    io.err(JSON.stringify({ error: (err as Error).message }));
    return 1;
  } finally {
    await db.destroy();
  }
}
