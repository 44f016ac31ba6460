import { access, mkdir, writeFile } from 'node:fs/promises';
import { constants } from 'node:fs';
import { isAbsolute, join, relative, resolve } from 'node:path';
import { createInterface } from 'node:readline/promises';
import type { TesClient } from '../client';
import { TesError } from '../errors';
import { RUN_STRATEGIES, type RunStrategy } from '../follow';
import { isValidIdempotencyKey } from '../idempotency';
import { describeQueuePlace, queuePlace } from '../queue';
import type { RunArtifact } from '../run';
import type { Artifact, Execution, ExecutionStatus, Quote, UploadedFile } from '../types';
import { FINAL_STATUSES } from '../types';
import { parseArguments, parseFiles, parseIntegerOption, setPath, UsageError } from './args';
import { describeTool } from './describe-tool';
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

/** `tes tools`: the catalog as a table; `tes tools NAME`: one tool's arguments, price, models and example. */
export async function toolsCommand(ctx: Context): Promise<void> {
  const catalog = await ctx.client.tools(ctx.io.signal);
  const name = ctx.positionals[0];
  if (name !== undefined) {
    const tool = catalog.tools.find((t) => t.name === name);
    if (!tool) {
      const near = catalog.tools.filter((t) => t.name.split('.')[0] === name.split('.')[0]).map((t) => t.name);
      throw new UsageError(`no tool named ${JSON.stringify(name)}${near.length ? ` (${near.join(', ')}?)` : ''}: tes tools lists them`);
    }
    print(ctx, tool, describeTool(tool, catalog, ctx.io.stdout.columns ?? 100));
    return;
  }
  // The overview shows each price's first clause; what a step that runs out of its deadline
  // costs repeats on nearly every row, and `tes tools NAME` gives it in full.
  const prices = catalog.tools.map((t) => t.price?.description ?? '-');
  const cut = prices.some((p) => p.includes('; '));
  const rows = catalog.tools.map((t, i) => [t.name, t.category, t.available ? 'yes' : 'no', (prices[i] ?? '-').split('; ')[0] ?? '-']);
  print(
    ctx,
    catalog,
    `price version ${catalog.priceVersion}, execution ${catalog.executionEnabled ? 'enabled' : 'DISABLED'}\n` +
      table(['TOOL', 'CATEGORY', 'AVAILABLE', 'PRICE'], rows, [], ctx.io.stdout.isTTY ? ctx.io.stdout.columns : undefined) +
      (cut ? 'a step that runs out of its deadline (step_timeout) is charged too\n' : '') +
      'tes tools NAME shows the arguments, models, prices and an example of a tool\n',
  );
}

/** Uploads every --file and puts its id at its argument path (uploads are free and deduplicated). */
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
    setPath(args, f.segments, uploaded.id, '--file');
    ctx.io.stderr.write(`uploaded ${f.path} as ${uploaded.id} (${describeUpload(uploaded)})\n`);
  }
  return args;
}

const round = (n: number, digits: number): string => String(Math.round(n * 10 ** digits) / 10 ** digits);

/**
 * The facts the gateway measured in an upload (sharp for images, ffprobe for audio and video),
 * when its answer has them: `640×360`, `3.0 s, video h264 640×360 25 fps, audio aac 48000 Hz 2 ch`.
 * Read as unknown, so an answer without them (an older gateway) or with more is fine.
 */
export function describeFacts(facts: unknown): string | undefined {
  if (typeof facts !== 'object' || facts === null) return undefined;
  const f = facts as Record<string, unknown>;
  const num = (o: unknown, k: string): number | undefined => {
    const v = typeof o === 'object' && o !== null ? (o as Record<string, unknown>)[k] : undefined;
    return typeof v === 'number' ? v : undefined;
  };
  const parts: string[] = [];
  if (num(f, 'width') !== undefined && num(f, 'height') !== undefined) parts.push(`${num(f, 'width')}×${num(f, 'height')}`);
  if (num(f, 'durationSeconds') !== undefined) parts.push(`${round(num(f, 'durationSeconds')!, 2)} s`);
  const video = f.video as Record<string, unknown> | null | undefined;
  if (video && typeof video === 'object') {
    const fps = num(video, 'frameRate');
    parts.push(
      `video ${typeof video.codec === 'string' ? video.codec : '?'} ${num(video, 'width') ?? '?'}×${num(video, 'height') ?? '?'}${fps ? ` ${round(fps, 2)} fps` : ''}`,
    );
  }
  const audio = f.audio as Record<string, unknown> | null | undefined;
  if (audio && typeof audio === 'object') {
    parts.push(`audio ${typeof audio.codec === 'string' ? audio.codec : '?'} ${num(audio, 'sampleRate') ?? '?'} Hz ${num(audio, 'channels') ?? '?'} ch`);
  }
  if (parts.length === 0) {
    for (const [k, v] of Object.entries(f)) if (k !== 'kind' && (typeof v === 'number' || typeof v === 'string')) parts.push(`${k} ${v}`);
  }
  return parts.length ? parts.join(', ') : undefined;
}

function describeUpload(u: UploadedFile): string {
  const facts = describeFacts((u as UploadedFile & { facts?: unknown }).facts);
  return `${u.mimeType}, ${u.sizeBytes.toLocaleString('en-US')} bytes${facts ? `, ${facts}` : ''}`;
}

/** `tes upload PATH`: the file id to pass as a fileId argument, and what the gateway measured in the file. */
export async function uploadCommand(ctx: Context): Promise<void> {
  const path = ctx.positionals[0]!;
  await access(path, constants.R_OK).catch(() => {
    throw new UsageError(`cannot read ${path}`);
  });
  const uploaded = await ctx.client.upload(path, str(ctx.values.type), ctx.io.signal);
  print(ctx, uploaded, `${uploaded.id}\n  ${describeUpload(uploaded)}\n  sha256 ${uploaded.sha256}, kept until ${uploaded.expiresAt}\n`);
}

function describeQuote(q: Quote): string {
  const units = `${q.estimatedUnits} ${q.unit}${q.estimatedUnits === 1 ? '' : 's'}`;
  return `${q.tool} (${q.model}): at most ${usd(q.maximumChargeMicros)} (${units}), at least ${usd(q.minimumChargeMicros)}; price version ${q.priceVersion}\n`;
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

/** A saved file's path as the user would type it: relative when under the current folder. */
function shown(path: string): string {
  const rel = relative(process.cwd(), path);
  return rel && !rel.startsWith('..') && !isAbsolute(rel) ? rel : path;
}

function savedLines(files: SavedFile[]): string {
  return files.map((f) => `saved ${shown(f.path)}  (${f.mimeType}, ${f.sizeBytes.toLocaleString('en-US')} bytes, sha256 checked)\n`).join('');
}

function describeExecution(e: Execution): string {
  const place = queuePlace(e);
  const lines = [
    `${e.id}  ${e.tool} (${e.model})  ${e.status}${e.cancelRequested && e.status !== 'cancelled' ? ' (cancel requested)' : ''}`,
    // Only while queued, and only from a server that reports it; the estimate as sent, too.
    ...(place ? [`  ${describeQueuePlace(place)}${place.estimatedStartAt ? ` (${e.progress.estimatedStartAt})` : ''}`] : []),
    `  steps ${e.progress.completedSteps}/${e.progress.totalSteps}, reserved ${usd(e.reservedMicros)}, charged ${usd(e.chargedMicros)}`,
    `  created ${e.createdAt}${e.finishedAt ? `, finished ${e.finishedAt}` : ''}`,
  ];
  if (e.errorCode) lines.push(`  error ${e.errorCode}${e.errorMessage ? `: ${e.errorMessage}` : ''}`);
  for (const a of e.output?.artifacts ?? [])
    lines.push(`  artifact ${a.id}  ${a.mimeType}, ${a.sizeBytes.toLocaleString('en-US')} bytes, sha256 ${a.sha256.slice(0, 12)}…`);
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
  const idempotencyKey = str(ctx.values['idempotency-key']);
  if (idempotencyKey !== undefined && !isValidIdempotencyKey(idempotencyKey)) {
    throw new UsageError(`--idempotency-key must be 8-128 of letters, digits, ".", "_", ":" or "-", got ${JSON.stringify(idempotencyKey)}`);
  }
  const args = await buildArguments(ctx);
  const quote = await ctx.client.quote(tool, args, ctx.io.signal);
  ctx.io.stderr.write(describeQuote(quote));
  if (!(await confirm(ctx, quote))) throw new TesError('not_confirmed', 'not confirmed: nothing was submitted');
  const view = ctx.json ? undefined : new ProgressView(ctx.io.stderr);
  const result = await ctx.client
    .run(tool, args, {
      quote,
      strategy,
      ...(idempotencyKey ? { idempotencyKey } : {}),
      ...(view ? { onProgress: (e: Execution) => view.update(e) } : {}),
      ...(ctx.io.signal ? { signal: ctx.io.signal } : {}),
    })
    .finally(() => view?.done());
  const files = await saveArtifacts(ctx, result.artifacts);
  print(ctx, { execution: result.execution, files }, describeExecution(result.execution) + savedLines(files));
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
  const rows = page.data.map((e) => [e.id, e.tool, e.status, usd(e.chargedMicros), e.createdAt.replace('T', ' ').replace(/\.\d+Z$/, 'Z')]);
  const more = page.hasMore ? `more: tes executions --before ${page.nextBefore}${paging(ctx)}\n` : '';
  print(ctx, page, page.data.length === 0 ? 'no executions\n' : table(['ID', 'TOOL', 'STATUS', 'CHARGED', 'CREATED'], rows, [3]) + more);
}

/** The filters of this listing, repeated in the command for the next page. */
function paging(ctx: Context): string {
  return ['status', 'tool', 'limit'].map((k) => (str(ctx.values[k]) === undefined ? '' : ` --${k} ${str(ctx.values[k])}`)).join('');
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
  print(ctx, { files }, savedLines(files));
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
