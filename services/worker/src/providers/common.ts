import { StepError } from '@tes/core';
import type { Metrics, ProviderCallOutcome } from '@tes/observability';
import { BlockedAddressError, HttpStatusError, retryableCreate, retryableRead, retryAfterMs, retryWithin, type GuardedHttp } from '@tes/outbound';
import { OutcomeUnknown } from '../outcome-unknown';

export type ProviderName = 'replicate' | 'fal' | 'openai';

/** The output files a provider job produced, as URLs to fetch (from that provider) or bytes it returned inline. */
export type ProviderOutput = { url: string; provider?: ProviderName } | { bytes: Buffer };

/** `failed`: the provider's definitive failure (provider_error, or provider_timeout when it says the job hit its deadline). */
export type PollResult = { done: false } | { done: true; outputs: ProviderOutput[] } | { failed: string; errorCode?: 'provider_timeout' };

export interface ProviderCredentials {
  replicate?: string | undefined;
  fal?: string | undefined;
  openai?: string | undefined;
}

export interface ProviderSetup {
  http: GuardedHttp;
  baseUrls: { replicate: string; fal: string; openai: string };
  credentials: ProviderCredentials;
  /**
   * The provider job's deadline, from its creation: still running after it, the step fails
   * with provider_timeout; still unreadable after it, the execution goes to needs_review.
   */
  jobTimeoutMs: number;
  /** tes_provider_request_duration_seconds; absent in tests that do not look at it. */
  metrics?: Pick<Metrics, 'providerRequests'>;
}

export interface ProviderContext extends ProviderSetup {
  signal: AbortSignal;
  /**
   * On a create: how long the step will wait for the job from now (its deadline). A provider
   * that can enforce a deadline itself is sent it (Replicate's Cancel-After).
   */
  cancelAfterMs?: number;
}

/**
 * Times one provider HTTP call (each attempt, inside the retries, so errors a retry hides are
 * still counted) by provider, operation and outcome. A call cut short by our own signal
 * (shutdown, the step's deadline, a lost lease) says nothing about the provider: not counted.
 */
export async function timed<T>(
  ctx: ProviderContext,
  provider: ProviderName | 'unknown',
  operation: 'create' | 'poll' | 'cancel' | 'download',
  call: () => Promise<T>,
): Promise<T> {
  const end = ctx.metrics?.providerRequests.startTimer({ provider, operation });
  try {
    const result = await call();
    end?.({ outcome: 'ok' });
    return result;
  } catch (err) {
    if (!ctx.signal.aborted) end?.({ outcome: callOutcome(err) });
    throw err;
  }
}

function callOutcome(err: unknown): ProviderCallOutcome {
  if (err instanceof HttpStatusError) return err.status === 429 ? 'throttled' : err.status >= 500 ? 'server_error' : 'rejected';
  // a 2xx whose body is not the JSON it should be: answered, but unusable
  if (err instanceof SyntaxError) return 'server_error';
  return 'no_answer';
}

/**
 * The provider refused to take the request (429, 503) for longer than a create retries in
 * process: nothing was created, so it may be sent again. A provider_error for a caller that
 * cannot wait; the generate step waits (its slot free) until `retryAfterMs` and sends it again,
 * within the job's deadline (tools/generate.ts).
 */
export class CreateRefused extends StepError {
  constructor(
    status: number,
    /** The provider's Retry-After, when it sent one (Replicate's 429 says "resets in ~30s"). */
    readonly retryAfterMs: number | undefined,
  ) {
    super('provider_error', `the provider kept refusing the request (HTTP ${status})`);
    this.name = 'CreateRefused';
  }
}

/**
 * How long a create retries a refusal in process. Short: a rate limit that resets in ~30 s is
 * waited out with the execution's consumer slot free (CreateRefused), not inside the step,
 * where the wait would hold the slot and spend the step's deadline.
 */
export const CREATE_RETRY_WINDOW_MS = 2_000;

/**
 * Sends a request that creates provider work. Retried only on answers that say it was not
 * taken (429, 503), within CREATE_RETRY_WINDOW_MS; still refused, CreateRefused. A refusal to
 * connect (blocked address, DNS failure before sending) is a plain provider_error. Anything
 * else after the request may have been sent (4xx other than 429: rejected, provider_error; 5xx,
 * timeout, lost connection: unknown) is classified so the engine never sends it twice.
 */
export async function createJob<T>(send: () => Promise<T>, signal: AbortSignal): Promise<T> {
  try {
    return await retryWithin(send, retryableCreate, signal, CREATE_RETRY_WINDOW_MS);
  } catch (err) {
    throw classifyCreateError(err);
  }
}

export function classifyCreateError(err: unknown): Error {
  if (err instanceof StepError || err instanceof OutcomeUnknown) return err;
  if (err instanceof BlockedAddressError) return new StepError('provider_error', err.message);
  if (err instanceof HttpStatusError) {
    if (err.status === 429 || err.status === 503) return new CreateRefused(err.status, err.retryAfterMs);
    if (err.status >= 400 && err.status < 500) return new StepError('provider_error', `the provider rejected the request (HTTP ${err.status})`);
    return new OutcomeUnknown(`the provider answered HTTP ${err.status} to a request that may have started work`);
  }
  const code = (err as { code?: string }).code;
  if (code === 'ENOTFOUND' || code === 'ECONNREFUSED' || code === 'EAI_AGAIN') {
    return new StepError('provider_error', `the provider could not be reached (${code})`);
  }
  if ((err as Error).name === 'AbortError' || /timed out/i.test((err as Error).message)) {
    return new OutcomeUnknown('the provider did not answer a request that may have started work');
  }
  return new OutcomeUnknown(`a request that may have started provider work failed: ${(err as Error).message}`);
}

/**
 * A read of a provider job that exists (its status, its result, an output file) got no
 * definitive answer: a network error, a timeout, an HTTP error, an answer we cannot make
 * sense of. It says nothing about the job, which may still be running and billing us, so it
 * is never a step failure: the step keeps waiting until the job's deadline, then leaves the
 * outcome to an operator (OutcomeUnknown, needs_review).
 */
export class ReadFailed extends Error {
  constructor(
    message: string,
    /** The provider's Retry-After, when it sent one. */
    readonly retryAfterMs?: number,
  ) {
    super(message);
    this.name = 'ReadFailed';
  }
}

/**
 * How long one read retries in process. Short on purpose: a longer outage is waited out
 * across re-checks (the execution waits with its consumer slot free), while a retry here
 * holds the slot and spends the step's own deadline.
 */
const READ_RETRY_WINDOW_MS = 1_500;

/**
 * Reads (status polls, results, file downloads) retry on 408, 429, 5xx and network errors,
 * briefly; whatever still fails is a ReadFailed. An address refused by the guard is a
 * provider_error: it is refused before anything is sent and will be refused again.
 */
export async function read<T>(fn: () => Promise<T>, signal: AbortSignal): Promise<T> {
  const decided = (err: unknown) => err instanceof StepError || err instanceof OutcomeUnknown || err instanceof ReadFailed;
  try {
    return await retryWithin(fn, (err) => !decided(err) && retryableRead(err), signal, READ_RETRY_WINDOW_MS);
  } catch (err) {
    // Shutdown, lost lease, step deadline: the engine acts on the reason, not on this read.
    if (signal.aborted) throw signal.reason ?? err;
    if (decided(err)) throw err;
    if (err instanceof BlockedAddressError) throw new StepError('provider_error', err.message);
    if (err instanceof HttpStatusError) throw new ReadFailed(`the provider answered HTTP ${err.status}`, err.retryAfterMs);
    throw new ReadFailed(`the provider could not be read: ${(err as Error).message.slice(0, 200)}`);
  }
}

/** An output file's bytes, as fetched (or as the provider returned them inline). */
export interface FetchedOutput {
  body: Buffer;
  contentType: string | undefined;
}

/** Fetches an output file (through the address guard), capped in size. Fails with ReadFailed. */
export async function fetchOutput(ctx: ProviderContext, output: ProviderOutput, maxBytes: number): Promise<FetchedOutput> {
  if ('bytes' in output) return { body: output.bytes, contentType: undefined };
  return read(
    () =>
      timed(ctx, output.provider ?? 'unknown', 'download', async () => {
        const res = await ctx.http.request('GET', output.url, { signal: ctx.signal, maxBytes, timeoutMs: 120_000 });
        if (res.status !== 200) throw new HttpStatusError(res.status, res.body.toString('utf8').slice(0, 200), retryAfterMs(res.headers));
        const ct = res.headers['content-type'];
        return { body: res.body, contentType: typeof ct === 'string' ? ct : undefined };
      }),
    ctx.signal,
  );
}

/**
 * A provider credential of this worker. Missing before a job exists, the step fails
 * (provider_error). Missing when reading a job that exists, this worker cannot learn the
 * job's outcome, which is no outcome: ReadFailed (a worker that has it may read it later).
 */
export function requireCredential(value: string | undefined, name: string, use: 'create' | 'read' = 'create'): string {
  if (value) return value;
  const message = `${name} is not configured on this worker`;
  throw use === 'read' ? new ReadFailed(message) : new StepError('provider_error', message);
}
