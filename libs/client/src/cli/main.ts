import { parseArgs, type ParseArgsConfig } from 'node:util';
import { CLIENT_VERSION, DEFAULT_BASE_URL, TesClient } from '../client';
import { ExecutionUnsuccessfulError, TesApiError, TesError } from '../errors';
import { UsageError } from './args';
import * as commands from './commands';
import type { Context, Io, Values } from './commands';

type Options = NonNullable<ParseArgsConfig['options']>;

interface Command {
  usage: string;
  summary: string;
  options: Options;
  /** Names of the positional arguments, all required. */
  positionals: string[];
  run(ctx: Context): Promise<void>;
}

const ARG = { arg: { type: 'string', multiple: true }, file: { type: 'string', multiple: true } } satisfies Options;

const COMMANDS: Record<string, Command> = {
  tools: { usage: 'tes tools [--json]', summary: 'list the tools, their availability and prices', options: {}, positionals: [], run: commands.toolsCommand },
  quote: {
    usage: 'tes quote <tool> [--arg k=v ...] [--file field=path ...] [--json]',
    summary: 'the free quote: the most a run of these arguments can cost',
    options: ARG,
    positionals: ['tool'],
    run: commands.quoteCommand,
  },
  run: {
    usage: 'tes run <tool> [--arg k=v ...] [--file field=path ...] [--yes] [--out dir] [--strategy auto|stream|wait|poll] [--json]',
    summary: 'upload files, quote, confirm, run with progress, download the artifacts into --out (default .)',
    options: { ...ARG, yes: { type: 'boolean', short: 'y' }, out: { type: 'string' }, strategy: { type: 'string' } },
    positionals: ['tool'],
    run: commands.runCommand,
  },
  executions: {
    usage: 'tes executions [--status s] [--tool t] [--limit n] [--before exe_…] [--json]',
    summary: "the project's executions, newest first",
    options: { status: { type: 'string' }, tool: { type: 'string' }, limit: { type: 'string' }, before: { type: 'string' } },
    positionals: [],
    run: commands.executionsCommand,
  },
  execution: {
    usage: 'tes execution <id> [--json]',
    summary: 'one execution: status, steps, charge, artifacts',
    options: {},
    positionals: ['id'],
    run: commands.executionCommand,
  },
  cancel: {
    usage: 'tes cancel <id> [--json]',
    summary: 'request cancellation (work already started may still be charged)',
    options: {},
    positionals: ['id'],
    run: commands.cancelCommand,
  },
  download: {
    usage: 'tes download <id> [--out dir] [--json]',
    summary: 'save the artifacts of a succeeded execution',
    options: { out: { type: 'string' } },
    positionals: ['id'],
    run: commands.downloadCommand,
  },
  usage: {
    usage: 'tes usage [--json]',
    summary: 'this UTC month: requests, executions, charges, cap',
    options: {},
    positionals: [],
    run: commands.usageCommand,
  },
  project: {
    usage: 'tes project [--json]',
    summary: 'organization, project, key, balance and cap of the key',
    options: {},
    positionals: [],
    run: commands.projectCommand,
  },
};

const ENVIRONMENT = `Environment:
  TES_API_KEY   project API key (required; sent only in the Authorization header)
  TES_URL       API base URL (default ${DEFAULT_BASE_URL})
`;

function globalHelp(): string {
  const width = Math.max(...Object.keys(COMMANDS).map((n) => n.length));
  return (
    `tes ${CLIENT_VERSION}: command line for the Tool Execution Service\n\nUsage: tes <command> [options]\n\nCommands:\n` +
    Object.entries(COMMANDS)
      .map(([n, c]) => `  ${n.padEnd(width)}  ${c.summary}`)
      .join('\n') +
    `\n\nEvery command takes --json (machine-readable output on stdout) and --help.\n` +
    `--arg k=v: v is parsed as JSON when it parses (800, true, {"a":1}), else taken as text.\n\n${ENVIRONMENT}\n` +
    `Exit status: 0 ok, 1 API or network error, 2 usage error.\n`
  );
}

function commandHelp(name: string, c: Command): string {
  return `Usage: ${c.usage}\n\n${c.summary}\n\n${ENVIRONMENT}`;
}

/**
 * The CLI without the process: returns the exit status. 0 ok, 1 API/network/execution
 * error (the code is printed), 2 usage error (bad flags, missing TES_API_KEY, no --yes
 * without a terminal).
 */
export async function main(argv: string[], env: Record<string, string | undefined>, io: Io): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === 'help' || name === '--help' || name === '-h') {
    (name === undefined ? io.stderr : io.stdout).write(globalHelp());
    return name === undefined ? 2 : 0;
  }
  if (name === '--version') {
    io.stdout.write(`${CLIENT_VERSION}\n`);
    return 0;
  }
  const command = COMMANDS[name];
  if (!command) {
    io.stderr.write(`tes: unknown command ${JSON.stringify(name)}\n\n${globalHelp()}`);
    return 2;
  }
  let json = rest.includes('--json');
  try {
    const parsed = parseCommandLine(rest, command.options);
    const values = parsed.values as Values;
    json = values.json === true;
    if (values.help === true) {
      io.stdout.write(commandHelp(name, command));
      return 0;
    }
    if (parsed.positionals.length !== command.positionals.length) {
      throw new UsageError(
        `expected ${command.positionals.length ? command.positionals.map((p) => `<${p}>`).join(' ') : 'no positional arguments'}, got ${parsed.positionals.length}`,
      );
    }
    const apiKey = env.TES_API_KEY;
    if (!apiKey) throw new UsageError('TES_API_KEY is not set: export a project API key');
    const client = new TesClient({ apiKey, baseUrl: env.TES_URL || DEFAULT_BASE_URL });
    await command.run({ client, io, json, values, positionals: parsed.positionals });
    return 0;
  } catch (err) {
    return report(err, name, command, json, io);
  }
}

function parseCommandLine(args: string[], options: Options): ReturnType<typeof parseArgs<{ options: Options; allowPositionals: true }>> {
  try {
    return parseArgs({ args, options: { ...options, json: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } }, allowPositionals: true, strict: true });
  } catch (err) {
    // node:util throws TypeErrors coded ERR_PARSE_ARGS_* for unknown or malformed options.
    throw new UsageError(err instanceof Error ? err.message : String(err));
  }
}

function report(err: unknown, name: string, command: Command, json: boolean, io: Io): number {
  if (err instanceof UsageError) {
    io.stderr.write(`tes ${name}: ${err.message}\nUsage: ${command.usage}\n`);
    if (json) io.stdout.write(`${JSON.stringify({ error: { code: 'usage', message: err.message } }, null, 2)}\n`);
    return 2;
  }
  if (err instanceof TesError) {
    const api = err instanceof TesApiError ? err : undefined;
    const lines = [`tes ${name}: ${err.code}: ${err.message}`];
    const problems = api?.details?.errors;
    if (Array.isArray(problems)) {
      for (const p of problems as { instancePath?: string; message?: string }[]) lines.push(`  ${p.instancePath || '/'} ${p.message ?? ''}`);
    }
    if (api?.retryAfterSeconds !== undefined) lines.push(`  retry after ${api.retryAfterSeconds} s`);
    if (err.executionId) lines.push(`  execution ${err.executionId} (tes execution ${err.executionId})`);
    io.stderr.write(lines.join('\n') + '\n');
    if (json) {
      const error = {
        code: err.code,
        message: err.message,
        executionId: err.executionId,
        ...(api ? { status: api.status, errorStatus: api.errorStatus, details: api.details, requestId: api.requestId } : {}),
        ...(err instanceof ExecutionUnsuccessfulError ? { execution: err.execution } : {}),
      };
      io.stdout.write(`${JSON.stringify({ error }, null, 2)}\n`);
    }
    return 1;
  }
  const message = err instanceof Error ? err.message : String(err);
  io.stderr.write(`tes ${name}: ${message}\n`);
  if (json) io.stdout.write(`${JSON.stringify({ error: { code: 'error', message } }, null, 2)}\n`);
  return 1;
}
