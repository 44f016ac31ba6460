import type { components, Execution as ClientExecution, ExecutionList } from '@tes/client';

type Schemas = components['schemas'];
export type Tool = Schemas['Tool'];
export type Quote = Schemas['Quote'];
/** The SDK's: the generated schema plus the place in line of a queued execution (progress.queuePosition). */
export type Execution = ClientExecution;
export type Artifact = Schemas['Artifact'];
export type UploadedFile = Schemas['UploadedFile'];
export type Download = Schemas['Download'];
export type Project = Schemas['Project'];
export type Usage = Schemas['Usage'];
export type ExecutionStatus = Execution['status'];

export type Catalog = Schemas['Catalog'];
export type ExecutionPage = ExecutionList;

/** The `error` of an envelope; a network failure or a non-JSON answer gets one of its own. */
export interface ErrorBody {
  status: string;
  message: string;
  details?: Record<string, unknown>;
}

/** A refused request: the HTTP status (0 when nothing came back) and the error envelope. */
export class ApiError extends Error {
  constructor(
    readonly httpStatus: number,
    readonly body: ErrorBody,
    readonly requestId: string | null,
  ) {
    super(body.message);
  }
}

export const TERMINAL: readonly ExecutionStatus[] = ['succeeded', 'failed', 'cancelled', 'needs_review'];
export const EXECUTION_STATUSES: readonly ExecutionStatus[] = ['queued', 'running', 'waiting', 'succeeded', 'failed', 'cancelled', 'needs_review'];

interface CallOptions {
  body?: unknown;
  headers?: Record<string, string>;
  signal?: AbortSignal;
}

/**
 * The API on this page's own origin. The key travels only in the Authorization header of
 * same-origin requests (relative URLs), never in a URL.
 */
export class Api {
  constructor(private readonly key: string) {}

  /** A JSON request; resolves with the whole parsed body, throws ApiError for any non-2xx. */
  // eslint-disable-next-line @typescript-eslint/no-unnecessary-type-parameters -- the caller names the body's type (openapi.json's, through @tes/client)
  async call<T>(method: 'GET' | 'POST' | 'DELETE', path: string, options: CallOptions = {}): Promise<{ body: T; status: number; headers: Headers }> {
    const res = await this.send(method, path, options);
    const requestId = res.headers.get('x-request-id');
    let body: unknown;
    try {
      body = await res.json();
    } catch {
      throw new ApiError(res.status, { status: 'UNKNOWN', message: 'unexpected_response', details: { httpStatus: res.status } }, requestId);
    }
    if (!res.ok) {
      const error = (body as { error?: ErrorBody } | null)?.error;
      throw new ApiError(res.status, error ?? { status: 'UNKNOWN', message: 'unexpected_response', details: { httpStatus: res.status } }, requestId);
    }
    return { body: body as T, status: res.status, headers: res.headers };
  }

  /** The raw response (the event stream reads its body as it arrives). */
  async send(method: 'GET' | 'POST' | 'DELETE', path: string, options: CallOptions = {}): Promise<Response> {
    const headers: Record<string, string> = { Authorization: `Bearer ${this.key}`, Accept: 'application/json', ...options.headers };
    if (options.body !== undefined) headers['Content-Type'] = 'application/json';
    try {
      return await fetch(path, {
        method,
        headers,
        body: options.body === undefined ? null : JSON.stringify(options.body),
        signal: options.signal ?? null,
        credentials: 'omit',
        cache: 'no-store',
      });
    } catch (err) {
      if (options.signal?.aborted) throw err;
      throw new ApiError(0, { status: 'NETWORK', message: 'network_error', details: { reason: (err as Error).message } }, null);
    }
  }

  private async data<T>(path: string): Promise<T> {
    return (await this.call<{ data: T }>('GET', path)).body.data;
  }

  project(): Promise<Project> {
    return this.data('/tools/project');
  }

  usage(): Promise<Usage> {
    return this.data('/tools/usage');
  }

  catalog(): Promise<Catalog> {
    return this.data('/tools');
  }

  execution(id: string): Promise<Execution> {
    return this.data(`/tools/executions/${encodeURIComponent(id)}`);
  }

  /** A fresh download URL (valid ≤ 300 s) for an artifact. */
  download(executionId: string, artifactId: string): Promise<Download> {
    return this.data(`/tools/executions/${encodeURIComponent(executionId)}/artifacts/${encodeURIComponent(artifactId)}/download`);
  }

  async quote(tool: string, args: unknown, signal?: AbortSignal): Promise<Quote> {
    return (await this.call<{ data: Quote }>('POST', '/tools/quote', { body: { tool, arguments: args }, ...(signal ? { signal } : {}) })).body.data;
  }

  async submit(tool: string, args: unknown, quote: Quote): Promise<Execution> {
    const body = { tool, arguments: args, priceVersion: quote.priceVersion, maximumChargeMicros: quote.maximumChargeMicros };
    const headers = { 'Idempotency-Key': `console-${crypto.randomUUID()}` };
    return (await this.call<{ data: Execution }>('POST', `/tools/${encodeURIComponent(tool)}`, { body, headers })).body.data;
  }

  async cancel(id: string): Promise<Execution> {
    return (await this.call<{ data: Execution }>('POST', `/tools/executions/${encodeURIComponent(id)}/cancel`)).body.data;
  }

  async upload(file: File): Promise<UploadedFile> {
    const data = await base64Of(file);
    return (await this.call<{ data: UploadedFile }>('POST', '/tools/upload', { body: { mimeType: file.type, data } })).body.data;
  }

  async list(filter: { status?: string; tool?: string; before?: string; limit: number }): Promise<ExecutionPage> {
    const q = new URLSearchParams({ limit: String(filter.limit) });
    if (filter.status) q.set('status', filter.status);
    if (filter.tool) q.set('tool', filter.tool);
    if (filter.before) q.set('before', filter.before);
    return (await this.call<ExecutionPage>('GET', `/tools/executions?${q.toString()}`)).body;
  }
}

/** The file's bytes in Base64 (what POST /tools/upload takes). */
function base64Of(file: File): Promise<string> {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => {
      const url = reader.result as string;
      resolve(url.slice(url.indexOf(',') + 1));
    };
    reader.onerror = () => reject(reader.error ?? new Error('the file could not be read'));
    reader.readAsDataURL(file);
  });
}
