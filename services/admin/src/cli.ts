import { parseArgs } from 'node:util';
import type { Knex } from 'knex';
import { isAppError } from '@tes/core';
import { COMMANDS } from './commands';
import { UsageError, type CommandSpec } from './spec';

export interface CliIo {
  out: (text: string) => void;
  err: (text: string) => void;
}

function commandHelp(c: CommandSpec): string {
  const lines = [`usage: admin ${c.name}${c.positionals ? ` ${c.positionals}` : ''}${Object.keys(c.options).length ? ' [options]' : ''}`, '', c.summary, ''];
  for (const [name, o] of Object.entries(c.options)) lines.push(`  --${name.padEnd(20)} ${o.description}${o.required ? ' (required)' : ''}`);
  return lines.join('\n');
}

function generalHelp(): string {
  return [
    'usage: npm run admin -- <command> [options]     (JSON on stdout)',
    '',
    'commands:',
    ...COMMANDS.map((c) => `  ${c.name.padEnd(24)} ${c.summary}`),
    '',
    'Each command takes --help. Configuration comes from the environment (DATABASE_URL, ...).',
    'Exit status: 0 ok, 1 failed (ledger audit: invariant broken), 2 bad usage.',
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

/**
 * Runs one admin command. Returns the exit code. `connect` is called only for a valid
 * command (so --help and usage errors need no database).
 */
export async function runCli(argv: string[], connect: () => Knex, io: CliIo): Promise<number> {
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
  let values: Record<string, string | undefined>;
  let positionals: string[];
  try {
    const parsed = parseArgs({
      args: rest,
      options: Object.fromEntries(Object.keys(command.options).map((k) => [k, { type: 'string' as const }])),
      allowPositionals: command.positionals !== undefined,
      strict: true,
    });
    values = parsed.values;
    positionals = parsed.positionals;
    for (const [k, o] of Object.entries(command.options)) {
      if (o.required && (values[k] === undefined || values[k] === '')) throw new UsageError(`--${k} is required`);
    }
  } catch (err) {
    io.err(JSON.stringify({ error: (err as Error).message, usage: commandHelp(command) }));
    return 2;
  }
  const db = connect();
  try {
    const result = await command.run(db, values, positionals);
    io.out(JSON.stringify(result, null, 2));
    if (command.name === 'ledger audit' && !(result as { ok: boolean }).ok) return 1;
    return 0;
  } catch (err) {
    // Input the database refused (an unknown id): a usage error, like the checks above.
    if (err instanceof UsageError || (isAppError(err) && err.code === 'invalid_request')) {
      io.err(JSON.stringify({ error: err.message }));
      return 2;
    }
    io.err(JSON.stringify({ error: (err as Error).message }));
    return 1;
  } finally {
    await db.destroy();
  }
}
