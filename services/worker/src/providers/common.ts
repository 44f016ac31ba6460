import { StepError } from '@tes/core';
import { BlockedAddressError, HttpStatusError, ProviderHttp, retryableCreate, retryableRead, withRetries } from './http';
import { OutcomeUnknown } from '../runner';

/** The output files a provider job produced, as URLs to fetch or bytes it returned inline. */
export type ProviderOutput = { url: string } | { bytes: Buffer };

export type PollResult = { done: false } | { done: true; outputs: ProviderOutput[] } | { failed: string };

export interface ProviderCredentials {
  replicate?: string | undefined;
  fal?: string | undefined;
  openai?: string | undefined;
}

export interface ProviderSetup {
  http: ProviderHttp;
  baseUrls: { replicate: string; fal: string; openai: string };
  credentials: ProviderCredentials;
  /** How long a provider job may stay unfinished before the step fails with provider_timeout. */
  jobTimeoutMs: number;
}

export interface ProviderContext extends ProviderSetup {
  signal: AbortSignal;
}

/**
 * Sends a request that creates provider work. Retried only on answers that say it was not
 * taken (429, 503). A refusal to connect (blocked address, DNS failure before sending) is a
 * plain provider_error. Anything else after the request may have been sent (4xx other than
 * 429: rejected, provider_error; 5xx, timeout, lost connection: unknown) is classified so
 * the engine never sends it twice.
 */
export async function createJob<T>(send: () => Promise<T>, signal: AbortSignal): Promise<T> {
  try {
    return await withRetries(send, retryableCreate, signal);
  } catch (err) {
    throw classifyCreateError(err);
  }
}

export function classifyCreateError(err: unknown): Error {
  if (err instanceof StepError || err instanceof OutcomeUnknown) return err;
  if (err instanceof BlockedAddressError) return new StepError('provider_error', err.message);
  if (err instanceof HttpStatusError) {
    if (err.status === 429 || err.status === 503) return new StepError('provider_error', `the provider kept refusing the request (HTTP ${err.status})`);
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

/** Reads (status polls, result and file downloads) retry on 429, 5xx and network errors. */
export async function read<T>(fn: () => Promise<T>, signal: AbortSignal): Promise<T> {
  try {
    return await withRetries(fn, retryableRead, signal);
  } catch (err) {
    if (err instanceof BlockedAddressError) throw new StepError('provider_error', err.message);
    if (err instanceof HttpStatusError && err.status >= 400 && err.status < 500 && err.status !== 429) {
      throw new StepError('provider_error', `the provider refused a read (HTTP ${err.status})`);
    }
    throw new StepError('provider_error', `the provider could not be read: ${(err as Error).message.slice(0, 200)}`);
  }
}

/** Fetches an output file (through the address guard), capped in size. */
export async function fetchOutput(ctx: ProviderContext, output: ProviderOutput, maxBytes: number): Promise<{ body: Buffer; contentType: string | undefined }> {
  if ('bytes' in output) return { body: output.bytes, contentType: undefined };
  return read(async () => {
    const res = await ctx.http.request('GET', output.url, { signal: ctx.signal, maxBytes, timeoutMs: 120_000 });
    if (res.status !== 200) throw new HttpStatusError(res.status, res.body.toString('utf8').slice(0, 200), undefined);
    const ct = res.headers['content-type'];
    return { body: res.body, contentType: typeof ct === 'string' ? ct : undefined };
  }, ctx.signal);
}

export function requireCredential(value: string | undefined, name: string): string {
  if (!value) throw new StepError('provider_error', `${name} is not configured on this worker`);
  return value;
}
