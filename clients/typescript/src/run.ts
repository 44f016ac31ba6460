import { ExecutionUnsuccessfulError, markSubmitError, QuoteAboveMaximumError, TesAbortError, TesError } from './errors';
import { DEFAULT_FIRST_EVENT_TIMEOUT_MS, RUN_STRATEGIES, WAIT_SECONDS, followExecution, type FollowClient, type RunStrategy } from './follow';
import { newIdempotencyKey } from './idempotency';
import type { Artifact, Download, Execution, Quote, SubmitOptions, SubmitResult, ToolArguments } from './types';

export type { PollResult, RunStrategy } from './follow';

/** The client calls a run makes. TesClient has them; naming them here keeps run.ts free of client.ts. */
export interface RunClient extends FollowClient {
  quote(tool: string, args: ToolArguments, signal?: AbortSignal): Promise<Quote>;
  submit(tool: string, args: ToolArguments, options: SubmitOptions): Promise<SubmitResult>;
  download(id: string, artifactId: string, signal?: AbortSignal): Promise<Buffer>;
  downloadUrl(id: string, artifactId: string, signal?: AbortSignal): Promise<Download>;
}

export interface RunOptions {
  /** Called with the execution as accepted, then with every update: each stream event, wait answer or poll. */
  onProgress?: (execution: Execution) => void;
  /**
   * How to learn that the execution ended (see RunStrategy). Default 'auto': the event
   * stream; `Prefer: wait` if the stream is unusable; polling if the server ignores the wait.
   */
  strategy?: RunStrategy;
  /** 'auto' and 'stream': no event within this many ms means the stream is held back. Default 5000. */
  firstEventTimeoutMs?: number;
  /**
   * Stops waiting. Fired after the submit was accepted, the execution still runs (and may be
   * charged): the TesAbortError carries its executionId to poll or cancel.
   */
  signal?: AbortSignal;
  /** Refuse before submitting when the quote's maximum is above this many micros. */
  maximumChargeMicros?: number;
  /** A quote already shown to the user: submitted as is instead of quoting again. */
  quote?: Quote;
  /**
   * Use this key instead of a generated one: to resume a run whose caller crashed after
   * submitting, or to resend after an error with `mayHaveBeenAccepted` (pass its
   * `idempotencyKey`, with the same tool, arguments and quote): the gateway answers with the
   * execution that key made, if any, instead of reserving again.
   */
  idempotencyKey?: string;
}

export interface RunArtifact extends Artifact {
  /** The bytes, checked against sizeBytes and sha256. */
  download(signal?: AbortSignal): Promise<Buffer>;
  /** A fresh presigned URL (≤ 300 s; private: do not log it). */
  downloadUrl(signal?: AbortSignal): Promise<Download>;
}

export interface RunResult {
  execution: Execution;
  artifacts: RunArtifact[];
  quote: Quote;
  idempotencyKey: string;
  /** True when the accepted answer was a replay of an earlier send of this run's submit. */
  replayed: boolean;
}

/**
 * The paid flow with the contract's guarantees on the caller's side:
 * - ONE idempotency key per run, made before the first send and reused by every resend
 *   (the transport resends the same bytes after a lost connection or a 5xx), so a run
 *   creates at most one execution and one reservation;
 * - the money 429s (insufficient_balance, monthly_cap_exceeded) are thrown after one send;
 * - every error after the key was made carries it (`idempotencyKey`); one whose submit got no
 *   definite answer after every resend (no answer, a 5xx, a timeout, an abort) says
 *   `mayHaveBeenAccepted`: run again with `{ idempotencyKey: err.idempotencyKey }`, never
 *   with a new key, or it can pay twice;
 * - then the execution is followed (follow.ts): a stream or a wait sends a request only when
 *   something changed or a wait ran out; polls are at least `pollIntervalMs` apart (5 s by
 *   default, docs/api.md#limits) and wait longer when the gateway's Retry-After says so.
 *
 * Only 'wait' sends `Prefer: wait` on the submit: there it makes a short run one request. The
 * others submit without it, because the answer then comes at once and the stream reports every
 * step from the first moment; a held submit would show nothing while it is held, to save one
 * request that only the shortest runs would notice.
 */
export async function runTool(client: RunClient, tool: string, args: ToolArguments, options: RunOptions): Promise<RunResult> {
  const { signal } = options;
  const strategy = options.strategy ?? 'auto';
  // Checked before anything is spent: a JavaScript caller's typo must not leave a paid execution unfollowed.
  if (!RUN_STRATEGIES.includes(strategy)) throw new TypeError(`strategy must be one of ${RUN_STRATEGIES.join(', ')}, got ${JSON.stringify(strategy)}`);
  let executionId: string | undefined;
  let idempotencyKey: string | undefined;
  try {
    const quote = options.quote ?? (await client.quote(tool, args, signal));
    if (options.maximumChargeMicros !== undefined && quote.maximumChargeMicros > options.maximumChargeMicros) {
      throw new QuoteAboveMaximumError(quote.maximumChargeMicros, options.maximumChargeMicros);
    }
    idempotencyKey = options.idempotencyKey ?? newIdempotencyKey();
    const submitted = await client.submit(tool, args, {
      priceVersion: quote.priceVersion,
      maximumChargeMicros: quote.maximumChargeMicros,
      idempotencyKey,
      ...(signal ? { signal } : {}),
      ...(strategy === 'wait' ? { waitSeconds: WAIT_SECONDS } : {}),
    });
    executionId = submitted.execution.id;
    options.onProgress?.(submitted.execution);
    const execution = await followExecution(client, submitted.execution, {
      strategy,
      signal,
      onProgress: options.onProgress,
      firstEventTimeoutMs: options.firstEventTimeoutMs ?? DEFAULT_FIRST_EVENT_TIMEOUT_MS,
      retryAfterSeconds: submitted.retryAfterSeconds,
    });
    if (execution.status !== 'succeeded') throw new ExecutionUnsuccessfulError(execution);
    const id = execution.id;
    const artifacts = (execution.output?.artifacts ?? []).map((a): RunArtifact => ({
      ...a,
      download: (s?: AbortSignal) => client.download(id, a.id, s),
      downloadUrl: (s?: AbortSignal) => client.downloadUrl(id, a.id, s),
    }));
    return { execution, artifacts, quote, idempotencyKey, replayed: submitted.replayed };
  } catch (err) {
    const e = signal?.aborted && !(err instanceof TesError) ? new TesAbortError(executionId, err) : err;
    throw e instanceof TesError ? withRun(e, executionId, idempotencyKey) : e;
  }
}

/** The execution and the key of this run on its error; before acceptance, whether the submit may have been accepted. */
function withRun<E extends TesError>(err: E, executionId: string | undefined, idempotencyKey: string | undefined): E {
  if (executionId !== undefined && err.executionId === undefined) err.executionId = executionId;
  return idempotencyKey === undefined ? err : markSubmitError(err, idempotencyKey);
}
