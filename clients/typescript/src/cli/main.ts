import { parseArgs, type ParseArgsConfig } from 'node:util';
import { CLIENT_VERSION, DEFAULT_BASE_URL, TesClient } from '../client';
import { ExecutionUnsuccessfulError, TesApiError, TesError } from '../errors';
import { UsageError } from './args';
import { describeError } from './describe-error';
import * as commands from './commands';
import { wrap } from './format';
import type { Context, Io, Values } from './commands';

type Options = NonNullable<ParseArgsConfig['options']>;

interface Command {
  usage: string;
  summary: string;
  /** Each option or argument and what it means, shown by `tes <command> --help`; an empty name is a note. */
  details: [string, string][];
  options: Options;
  /** Names of the positional arguments; a trailing `?` marks one that may be left out. */
  positionals: string[];
  run(ctx: Context): Promise<void>;
}

const ARG = { arg: { type: 'string', multiple: true }, file: { type: 'string', multiple: true } } satisfies Options;
const ARG_HELP: [string, string][] = [
  [
    '--arg PATH=VALUE',
    'an argument; VALUE is JSON when it parses (800, true, {"a":1}, "2026"), else text. PATH reaches into objects and arrays: --arg resize.width=256 --arg slides[0].text=Hi',
  ],
  ['--file PATH=FILE', 'upload FILE and put its file id at PATH: --file fileId=photo.jpg, --file slides[1].fileId=frame.png (array items in order, from [0])'],
];

const COMMANDS: Record<string, Command> = {
  tools: {
    usage: 'tes tools [NAME] [--json]',
    summary: 'list the tools and their prices; with NAME, one tool: arguments, models, example',
    details: [['NAME', 'a tool name (image.render): its arguments as a table (* required), price, models and an example command']],
    options: {},
    positionals: ['name?'],
    run: commands.toolsCommand,
  },
  upload: {
    usage: 'tes upload FILE [--type MIME] [--json]',
    summary: 'upload a file (free): prints its file id and what was measured in it',
    details: [
      ['FILE', 'a PNG, JPEG, WAV, MP3 or MP4 file, at most 12 MiB; the same bytes give the same id'],
      ['--type MIME', 'the type, when it cannot be told from the bytes (image/png, audio/mpeg, …)'],
      ['', 'Pass the id as a fileId argument: tes run image.transform --arg fileId=file_… (or let tes run --file upload it).'],
    ],
    options: { type: { type: 'string' } },
    positionals: ['file'],
    run: commands.uploadCommand,
  },
  quote: {
    usage: 'tes quote TOOL [--arg PATH=VALUE ...] [--file PATH=FILE ...] [--json]',
    summary: 'the free quote: the most a run of these arguments can cost',
    details: ARG_HELP,
    options: ARG,
    positionals: ['tool'],
    run: commands.quoteCommand,
  },
  run: {
    usage: 'tes run TOOL [--arg PATH=VALUE ...] [--file PATH=FILE ...] [--yes] [--out DIR] [--strategy auto|stream|wait|poll] [--idempotency-key KEY] [--json]',
    summary: 'upload files, quote, confirm, run with progress, download the artifacts',
    details: [
      ...ARG_HELP,
      ['--yes, -y', 'run without asking (needed when stdin is not a terminal); up to the quoted maximum is reserved'],
      ['--out DIR', 'where the artifacts are saved, as <artifact id>.<format> (default: the current folder)'],
      ['--strategy S', 'how to follow the execution: auto (default: the event stream, else Prefer: wait, else polling), stream, wait or poll'],
      [
        '--idempotency-key KEY',
        'submit with this key instead of a new one: after a failed run whose outcome is unknown, rerun the same command with the key its error printed; the service answers with the execution that key made instead of reserving again',
      ],
    ],
    options: {
      ...ARG,
      yes: { type: 'boolean', short: 'y' },
      out: { type: 'string' },
      strategy: { type: 'string' },
      'idempotency-key': { type: 'string' },
    },
    positionals: ['tool'],
    run: commands.runCommand,
  },
  executions: {
    usage: 'tes executions [--status S] [--tool T] [--limit N] [--before ID] [--json]',
    summary: "the project's executions, newest first",
    details: [
      ['--status S', 'only this status: queued, running, waiting, succeeded, failed, cancelled, needs_review'],
      ['--tool T', 'only this tool'],
      ['--limit N', 'at most N (1-100, default 20); the last line tells how to get the next page'],
      ['--before ID', 'the page after this execution (the nextBefore of the previous page)'],
    ],
    options: { status: { type: 'string' }, tool: { type: 'string' }, limit: { type: 'string' }, before: { type: 'string' } },
    positionals: [],
    run: commands.executionsCommand,
  },
  execution: {
    usage: 'tes execution ID [--json]',
    summary: 'one execution: status, steps, charge, artifacts',
    details: [['ID', 'an execution id (exe_…)']],
    options: {},
    positionals: ['id'],
    run: commands.executionCommand,
  },
  cancel: {
    usage: 'tes cancel ID [--json]',
    summary: 'cancel an execution (a queued one ends at once; a running step may still be charged)',
    details: [['ID', 'an execution id (exe_…)']],
    options: {},
    positionals: ['id'],
    run: commands.cancelCommand,
  },
  download: {
    usage: 'tes download ID [--out DIR] [--json]',
    summary: 'save every artifact of a succeeded execution, each checked against its sha256',
    details: [
      ['ID', 'an execution id (exe_…)'],
      ['--out DIR', 'where to save them, as <artifact id>.<format> (default: the current folder)'],
    ],
    options: { out: { type: 'string' } },
    positionals: ['id'],
    run: commands.downloadCommand,
  },
  usage: {
    usage: 'tes usage [--json]',
    summary: 'this UTC month: requests, executions, charges, cap',
    details: [],
    options: {},
    positionals: [],
    run: commands.usageCommand,
  },
  project: {
    usage: 'tes project [--json]',
    summary: 'organization, project, key, balance and cap of the key',
    details: [],
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
    `\n\nEvery command takes --json (machine-readable output on stdout) and --help (tes run --help).\n\n${ENVIRONMENT}\n` +
    `Exit status: 0 ok, 1 API or network error, 2 usage error.\n`
  );
}

function commandHelp(c: Command, columns: number): string {
  // Options first (--json last of them), then the notes.
  const details: [string, string][] = [
    ...c.details.filter(([name]) => name !== ''),
    ['--json', 'machine-readable JSON on stdout (errors too); messages go to stderr'],
    ...c.details.filter(([name]) => name === ''),
  ];
  const width = Math.max(...details.map(([name]) => name.length));
  const textWidth = Math.max(40, Math.min(columns, 120) - width - 5);
  const lines = details.flatMap(([name, text]) =>
    name === ''
      ? ['', ...wrap(text, textWidth + width + 2).map((l) => `  ${l}`)]
      : wrap(text, textWidth).map((l, i) => `  ${(i === 0 ? name : '').padEnd(width)}  ${l}`),
  );
  const usage = wrap(c.usage, Math.min(columns, 120) - 8).join('\n       ');
  return `Usage: ${usage}\n\n${c.summary}\n\n${lines.join('\n')}\n\n${ENVIRONMENT}`;
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
  let client: TesClient | undefined;
  try {
    const parsed = parseCommandLine(rest, command.options);
    const values = parsed.values as Values;
    json = values.json === true;
    if (values.help === true) {
      io.stdout.write(commandHelp(command, io.stdout.columns ?? 80));
      return 0;
    }
    const least = command.positionals.filter((p) => !p.endsWith('?')).length;
    if (parsed.positionals.length < least || parsed.positionals.length > command.positionals.length) {
      const wanted = command.positionals.map((p) => (p.endsWith('?') ? `[${p.slice(0, -1).toUpperCase()}]` : p.toUpperCase())).join(' ');
      throw new UsageError(`expected ${wanted || 'no positional arguments'}, got ${parsed.positionals.length}`);
    }
    const apiKey = env.TES_API_KEY;
    if (!apiKey) throw new UsageError('TES_API_KEY is not set: export a project API key');
    client = new TesClient({ apiKey, baseUrl: env.TES_URL || DEFAULT_BASE_URL });
    await command.run({ client, io, json, values, positionals: parsed.positionals });
    return 0;
  } catch (err) {
    return report(err, name, command, json, io, client);
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

/**
 * Prints an error once, in words (describe-error.ts), and returns the exit status: 2 for a
 * usage error, 1 for anything else. With --json the error document also goes to stdout, with
 * the stable code for scripts.
 */
async function report(err: unknown, name: string, command: Command, json: boolean, io: Io, client: TesClient | undefined): Promise<number> {
  if (err instanceof UsageError) {
    io.stderr.write(`tes ${name}: ${err.message}\nUsage: ${command.usage}\n`);
    if (json) io.stdout.write(`${JSON.stringify({ error: { code: 'usage', message: err.message } }, null, 2)}\n`);
    return 2;
  }
  if (err instanceof TesError) {
    const api = err instanceof TesApiError ? err : undefined;
    const [first = err.code, ...more] = await describeError(err, client);
    const lines = [`tes ${name}: ${first}`, ...more];
    if (err.executionId && !(err instanceof ExecutionUnsuccessfulError)) lines.push(`  execution ${err.executionId}: tes execution ${err.executionId}`);
    else if (err instanceof ExecutionUnsuccessfulError) lines.push(`  details: tes execution ${err.execution.id}`);
    if (err.mayHaveBeenAccepted && err.idempotencyKey) {
      lines.push(
        `  the request may have been accepted; resend with --idempotency-key ${err.idempotencyKey}`,
        '  (the same command with it answers with that execution, if there is one, and never reserves twice; without it a rerun can pay twice)',
      );
    }
    io.stderr.write(lines.join('\n') + '\n');
    if (json) {
      const error = {
        code: err.code,
        message: err.message,
        executionId: err.executionId,
        idempotencyKey: err.idempotencyKey,
        mayHaveBeenAccepted: err.mayHaveBeenAccepted,
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
