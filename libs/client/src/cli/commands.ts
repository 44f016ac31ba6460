import { access, mkdir, writeFile } from 'node:fs/promises';
import { constants } from 'node:fs';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline/promises';
import type { TesClient } from '../client';
import { TesError } from '../errors';
import { RUN_STRATEGIES, type RunStrategy } from '../follow';
import type { RunArtifact } from '../run';
import type { Artifact, Execution, ExecutionStatus, Quote } from '../types';
import { FINAL_STATUSES } from '../types';
import { parseArguments, parseFiles, parseIntegerOption, UsageError } from './args';
import { ProgressView, table, usd, type Output } from './format';

export interface Io {
  stdout: Output;
  stderr: Output;
  stdin: NodeJS.ReadableStream & { isTTY?: boolean };
  /** Fired by Ctrl-C: stops waiting (the execution itself goes on). */
  signal?: AbortSignal;
}

export type Values = Record<string, string | boolean | string[] | undefined>;

export interface Context {
  client: TesClient;
  io: Io;
  json: boolean;
  values: Values;
  positionals: string[];
}

const str = (v: Values[string]): string | undefined => (typeof v === 'string' ? v : undefined);
const list = (v: Values[string]): string[] => (Array.isArray(v) ? v : []);

function print(ctx: Context, json: unknown, human: string): void {
  ctx.io.stdout.write(ctx.json ? `${JSON.stringify(json, null, 2)}\n` : human);
}

export async function toolsCommand(ctx: Context): Promise<void> {
  const catalog = await ctx.client.tools(ctx.io.signal);
  const rows = catalog.tools.map((t) => [t.name, t.category, t.available ? 'yes' : 'no', t.price?.description ?? '-']);
  print(
    ctx,
    catalog,
    `price version ${catalog.priceVersion}, execution ${catalog.executionEnabled ? 'enabled' : 'DISABLED'}\n` +
      table(['TOOL', 'CATEGORY', 'AVAILABLE', 'PRICE'], rows),
  );
}

/** Uploads every --file and puts its id into the arguments (uploads are free and deduplicated). */
async function buildArguments(ctx: Context): Promise<Record<string, unknown>> {
  const args = parseArguments(list(ctx.values.arg));
  const files = parseFiles(list(ctx.values.file), args);
  for (const f of files) {
    await access(f.path, constants.R_OK).catch(() => {
      throw new UsageError(`--file ${f.field}: cannot read ${f.path}`);
    });
  }
  for (const f of files) {
    const uploaded = await ctx.client.upload(f.path, undefined, ctx.io.signal);
    args[f.field] = uploaded.id;
    ctx.io.stderr.write(`uploaded ${f.path} as ${uploaded.id} (${uploaded.mimeType}, ${uploaded.sizeBytes} bytes)\n`);
  }
  return args;
}

function describeQuote(q: Quote): string {
  return (
    `${q.tool} (model ${q.model}): at most ${usd(q.maximumChargeMicros)} (${q.maximumChargeMicros} micros), ` +
    `at least ${usd(q.minimumChargeMicros)}; ${q.estimatedUnits} × ${q.unit} estimated; price version ${q.priceVersion}\n`
  );
}

export async function quoteCommand(ctx: Context): Promise<void> {
  const tool = ctx.positionals[0]!;
  const args = await buildArguments(ctx);
  const quote = await ctx.client.quote(tool, args, ctx.io.signal);
  print(ctx, { ...quote, arguments: args }, describeQuote(quote));
}

/**
 * Asks on the terminal whether to spend up to the quoted maximum. Without a terminal there
 * is nobody to ask: refuse unless --yes was given, never assume consent to a charge.
 */
async function confirm(ctx: Context, quote: Quote): Promise<boolean> {
  if (ctx.values.yes === true) return true;
  if (!ctx.io.stdin.isTTY || !ctx.io.stderr.isTTY) {
    throw new UsageError(`not a terminal, so nobody can confirm a charge of up to ${usd(quote.maximumChargeMicros)}: pass --yes to run anyway`);
  }
  const rl = createInterface({ input: ctx.io.stdin, output: ctx.io.stderr as NodeJS.WritableStream, terminal: true });
  try {
    const answer = await rl.question(`Run ${quote.tool} for at most ${usd(quote.maximumChargeMicros)}? [y/N] `);
    return /^\s*y(es)?\s*$/i.test(answer);
  } finally {
    rl.close();
  }
}

interface SavedFile {
  artifactId: string;
  path: string;
  mimeType: string;
  sizeBytes: number;
  sha256: string;
}

async function saveArtifacts(ctx: Context, artifacts: (Artifact & Pick<RunArtifact, 'download'>)[]): Promise<SavedFile[]> {
  const dir = resolve(str(ctx.values.out) ?? '.');
  await mkdir(dir, { recursive: true });
  const saved: SavedFile[] = [];
  for (const a of artifacts) {
    const bytes = await a.download(ctx.io.signal); // checked against sizeBytes and sha256
    const path = join(dir, `${a.id}.${a.format.replace(/[^A-Za-z0-9]/g, '')}`);
    await writeFile(path, bytes);
    saved.push({ artifactId: a.id, path, mimeType: a.mimeType, sizeBytes: a.sizeBytes, sha256: a.sha256 });
  }
  return saved;
}

function describeExecution(e: Execution): string {
  const lines = [
    `${e.id}  ${e.tool} (${e.model})  ${e.status}${e.cancelRequested && e.status !== 'cancelled' ? ' (cancel requested)' : ''}`,
    `  steps ${e.progress.completedSteps}/${e.progress.totalSteps}, reserved ${usd(e.reservedMicros)}, charged ${usd(e.chargedMicros)}`,
    `  created ${e.createdAt}${e.finishedAt ? `, finished ${e.finishedAt}` : ''}`,
  ];
  if (e.errorCode) lines.push(`  error ${e.errorCode}${e.errorMessage ? `: ${e.errorMessage}` : ''}`);
  for (const a of e.output?.artifacts ?? []) lines.push(`  artifact ${a.id} ${a.mimeType} ${a.sizeBytes} bytes sha256 ${a.sha256}`);
  return lines.join('\n') + '\n';
}

function strategyOption(ctx: Context): RunStrategy {
  const value = str(ctx.values.strategy) ?? 'auto';
  if (!(RUN_STRATEGIES as readonly string[]).includes(value))
    throw new UsageError(`--strategy must be one of ${RUN_STRATEGIES.join(', ')}, got ${JSON.stringify(value)}`);
  return value as RunStrategy;
}

/** Quote, confirm, run; progress on stderr from the event stream (none with --json: stdout is the document, stderr stays quiet). */
export async function runCommand(ctx: Context): Promise<void> {
  const tool = ctx.positionals[0]!;
  const strategy = strategyOption(ctx);
  const args = await buildArguments(ctx);
  const quote = await ctx.client.quote(tool, args, ctx.io.signal);
  ctx.io.stderr.write(describeQuote(quote));
  if (!(await confirm(ctx, quote))) throw new TesError('not_confirmed', 'not confirmed: nothing was submitted');
  const view = ctx.json ? undefined : new ProgressView(ctx.io.stderr);
  const result = await ctx.client
    .run(tool, args, {
      quote,
      strategy,
      ...(view ? { onProgress: (e: Execution) => view.update(e) } : {}),
      ...(ctx.io.signal ? { signal: ctx.io.signal } : {}),
    })
    .finally(() => view?.done());
  const files = await saveArtifacts(ctx, result.artifacts);
  print(ctx, { execution: result.execution, files }, describeExecution(result.execution) + files.map((f) => `saved ${f.path}\n`).join(''));
}

export async function executionsCommand(ctx: Context): Promise<void> {
  const status = str(ctx.values.status);
  if (status !== undefined && !(FINAL_STATUSES as string[]).concat(['queued', 'running', 'waiting']).includes(status)) {
    throw new UsageError(`--status must be one of queued, running, waiting, ${FINAL_STATUSES.join(', ')}`);
  }
  const limit = parseIntegerOption(str(ctx.values.limit), '--limit', 1, 100);
  const page = await ctx.client.executions(
    {
      ...(status ? { status: status as ExecutionStatus } : {}),
      ...(str(ctx.values.tool) ? { tool: str(ctx.values.tool)! } : {}),
      ...(limit ? { limit } : {}),
      ...(str(ctx.values.before) ? { before: str(ctx.values.before)! } : {}),
    },
    ctx.io.signal,
  );
  const rows = page.data.map((e) => [e.id, e.tool, e.status, usd(e.chargedMicros), e.createdAt]);
  print(ctx, page, table(['ID', 'TOOL', 'STATUS', 'CHARGED', 'CREATED'], rows) + (page.hasMore ? `more: tes executions --before ${page.nextBefore}\n` : ''));
}

export async function executionCommand(ctx: Context): Promise<void> {
  const e = await ctx.client.execution(ctx.positionals[0]!, ctx.io.signal);
  print(ctx, e, describeExecution(e));
}

export async function cancelCommand(ctx: Context): Promise<void> {
  const e = await ctx.client.cancel(ctx.positionals[0]!, ctx.io.signal);
  print(ctx, e, describeExecution(e));
}

export async function downloadCommand(ctx: Context): Promise<void> {
  const e = await ctx.client.execution(ctx.positionals[0]!, ctx.io.signal);
  const artifacts = (e.output?.artifacts ?? []).map((a) => ({ ...a, download: (s?: AbortSignal) => ctx.client.download(e.id, a.id, s) }));
  if (artifacts.length === 0) throw new UsageError(`${e.id} is ${e.status} and has no artifacts`);
  const files = await saveArtifacts(ctx, artifacts);
  print(ctx, { files }, files.map((f) => `saved ${f.path}\n`).join(''));
}

export async function usageCommand(ctx: Context): Promise<void> {
  const u = await ctx.client.usage(ctx.io.signal);
  print(
    ctx,
    u,
    [
      `period ${u.period.start} .. ${u.period.end}`,
      `requests ${u.requestCount}, executions settled ${u.executionCount}`,
      `charged ${usd(u.chargedMicros)}, reserved now ${usd(u.reservedMicros)}`,
      `monthly cap ${usd(u.monthlyCapMicros)}, remaining ${usd(u.remainingCapMicros)}`,
    ].join('\n') + '\n',
  );
}

export async function projectCommand(ctx: Context): Promise<void> {
  const p = await ctx.client.project(ctx.io.signal);
  print(
    ctx,
    p,
    [
      `organization ${p.organization.id} ${p.organization.name}`,
      `project ${p.project.id} ${p.project.name}`,
      `key ${p.key.id} ${p.key.name} (${p.key.role}): ${p.key.scopes.join(' ')}`,
      `balance available ${usd(p.balance.availableMicros)}, reserved ${usd(p.balance.reservedMicros)}`,
      `monthly cap ${usd(p.monthlyCapMicros)}`,
    ].join('\n') + '\n',
  );
}
