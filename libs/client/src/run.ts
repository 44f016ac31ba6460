import { ExecutionUnsuccessfulError, QuoteAboveMaximumError, TesAbortError, TesError } from './errors';
import { sleep } from './http';
import { newIdempotencyKey } from './idempotency';
import { isFinal, type Artifact, type Download, type Execution, type Quote, type SubmitOptions, type SubmitResult, type ToolArguments } from './types';

/** The client calls a run makes. TesClient has them; naming them here keeps run.ts free of client.ts. */
export interface RunClient {
  readonly pollIntervalMs: number;
  quote(tool: string, args: ToolArguments, signal?: AbortSignal): Promise<Quote>;
  submit(tool: string, args: ToolArguments, options: SubmitOptions): Promise<SubmitResult>;
  poll(id: string, signal?: AbortSignal): Promise<{ execution: Execution; retryAfterSeconds: number | undefined }>;
  download(id: string, artifactId: string, signal?: AbortSignal): Promise<Buffer>;
  downloadUrl(id: string, artifactId: string, signal?: AbortSignal): Promise<Download>;
}

export interface RunOptions {
  /** Called with the execution as accepted and after every poll. */
  onProgress?: (execution: Execution) => void;
  /**
   * Stops waiting. Fired after the submit was accepted, the execution still runs (and may be
   * charged): the TesAbortError carries its executionId to poll or cancel.
   */
  signal?: AbortSignal;
  /** Refuse before submitting when the quote's maximum is above this many micros. */
  maximumChargeMicros?: number;
  /** A quote already shown to the user: submitted as is instead of quoting again. */
  quote?: Quote;
  /** Use this key instead of a generated one (to resume a run whose caller crashed after submitting). */
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
 * - polls are at least `pollIntervalMs` apart (5 s by default, service-spec §4) and wait
 *   longer when the gateway's Retry-After says so (the 202 carries Retry-After: 5).
 */
export async function runTool(client: RunClient, tool: string, args: ToolArguments, options: RunOptions): Promise<RunResult> {
  const { signal } = options;
  let executionId: string | undefined;
  try {
    const quote = options.quote ?? (await client.quote(tool, args, signal));
    if (options.maximumChargeMicros !== undefined && quote.maximumChargeMicros > options.maximumChargeMicros) {
      throw new QuoteAboveMaximumError(quote.maximumChargeMicros, options.maximumChargeMicros);
    }
    const idempotencyKey = options.idempotencyKey ?? newIdempotencyKey();
    const submitted = await client.submit(tool, args, {
      priceVersion: quote.priceVersion,
      maximumChargeMicros: quote.maximumChargeMicros,
      idempotencyKey,
      ...(signal ? { signal } : {}),
    });
    let execution = submitted.execution;
    executionId = execution.id;
    options.onProgress?.(execution);
    let retryAfterSeconds = submitted.retryAfterSeconds;
    while (!isFinal(execution.status)) {
      await sleep(Math.max(client.pollIntervalMs, (retryAfterSeconds ?? 0) * 1000), signal);
      ({ execution, retryAfterSeconds } = await client.poll(execution.id, signal));
      options.onProgress?.(execution);
    }
    if (execution.status !== 'succeeded') throw new ExecutionUnsuccessfulError(execution);
    const id = execution.id;
    const artifacts = (execution.output?.artifacts ?? []).map(
      (a): RunArtifact => ({
        ...a,
        download: (s?: AbortSignal) => client.download(id, a.id, s),
        downloadUrl: (s?: AbortSignal) => client.downloadUrl(id, a.id, s),
      }),
    );
    return { execution, artifacts, quote, idempotencyKey, replayed: submitted.replayed };
  } catch (err) {
    if (signal?.aborted && !(err instanceof TesError)) throw withExecution(new TesAbortError(executionId, err), executionId);
    throw err instanceof TesError ? withExecution(err, executionId) : err;
  }
}

function withExecution<E extends TesError>(err: E, executionId: string | undefined): E {
  if (executionId !== undefined && err.executionId === undefined) err.executionId = executionId;
  return err;
}
