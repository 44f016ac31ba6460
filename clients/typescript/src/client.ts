import { createHash } from 'node:crypto';
import { readFile, stat } from 'node:fs/promises';
import { ArtifactIntegrityError, markSubmitError, parseRetryAfter, TesError, TesNetworkError, UploadTooLargeError } from './errors';
import { isValidIdempotencyKey } from './idempotency';
import { DEFAULT_RETRY, Transport, backoffMs, sleep, type FetchLike, type RetryOptions } from './http';
import { detectMimeType, MAX_UPLOAD_BYTES } from './media';
import { ExecutionEvents, type EventsOptions } from './events';
import { runTool, type PollResult, type RunOptions, type RunResult } from './run';
import type {
  Catalog,
  CheckedToolName,
  Download,
  Execution,
  ExecutionList,
  ExecutionQuery,
  Project,
  Quote,
  SubmitOptions,
  SubmitResult,
  ToolArguments,
  UploadedFile,
  Usage,
} from './types';

export const CLIENT_VERSION = '0.1.0';
export const DEFAULT_BASE_URL = 'http://127.0.0.1:8080';
/** docs/api.md#limits: poll an execution no more often than every 5 seconds. */
export const DEFAULT_POLL_INTERVAL_MS = 5_000;

export interface TesClientOptions {
  /** A project API key (`tes_…`). Sent only in the Authorization header. */
  apiKey: string;
  /** Default http://127.0.0.1:8080. */
  baseUrl?: string;
  /** Default: the global fetch of Node ≥ 20. */
  fetch?: FetchLike;
  /** Least time between two polls of an execution; a longer Retry-After wins. Default 5000. */
  pollIntervalMs?: number;
  /** Retry and backoff bounds (see RetryOptions). */
  retry?: Partial<RetryOptions>;
}

interface Envelope<T> {
  data: T;
}

/**
 * Client of the Tool Execution Service API. Every method maps one endpoint; `run` is the
 * whole paid flow (quote, submit with an idempotency key, resend safely, poll, artifacts).
 * Errors are TesError subclasses (errors.ts) with a stable `code`.
 */
export class TesClient {
  /** @public The base URL requests go to, without a trailing slash. */
  readonly baseUrl: string;
  /** @public Least time between two polls of an execution. */
  readonly pollIntervalMs: number;
  readonly retry: RetryOptions;
  private readonly http: Transport;
  private readonly fetchFn: FetchLike;

  constructor(options: TesClientOptions) {
    if (typeof options.apiKey !== 'string' || options.apiKey.trim() === '') throw new TypeError('TesClient: apiKey is required');
    const baseUrl = (options.baseUrl ?? DEFAULT_BASE_URL).replace(/\/+$/, '');
    const parsed = new URL(baseUrl);
    if (parsed.username || parsed.password || parsed.search) throw new TypeError('TesClient: baseUrl must carry no credentials or query');
    this.baseUrl = baseUrl;
    this.pollIntervalMs = options.pollIntervalMs ?? DEFAULT_POLL_INTERVAL_MS;
    this.retry = { ...DEFAULT_RETRY, ...options.retry };
    this.fetchFn = options.fetch ?? ((input, init) => fetch(input, init));
    this.http = new Transport({
      apiKey: options.apiKey,
      baseUrl,
      fetch: this.fetchFn,
      retry: this.retry,
      userAgent: `tes-client/${CLIENT_VERSION} node/${process.versions.node}`,
    });
  }

  /** GET /tools: the catalog with the current priceVersion. */
  async tools(signal?: AbortSignal): Promise<Catalog> {
    return (await this.http.request<Envelope<Catalog>>('GET', '/tools', { signal })).body.data;
  }

  /**
   * POST /tools/quote: free; the maximum that a submit would reserve. `tool` and `args` are
   * checked at compile time for the tools in tool-types.ts (see CheckedToolName).
   */
  async quote<T extends string>(tool: CheckedToolName<T>, args: ToolArguments<T>, signal?: AbortSignal): Promise<Quote> {
    return (await this.http.request<Envelope<Quote>>('POST', '/tools/quote', { body: { tool, arguments: args }, signal })).body.data;
  }

  /**
   * POST /tools/upload. `source` is the bytes or a file path; the MIME type is detected from
   * the bytes (or the file name) when not given. Identical content gives the same file id,
   * which is why a resend is safe. A file above MAX_UPLOAD_BYTES throws UploadTooLargeError
   * before it is read or sent.
   */
  async upload(source: Uint8Array | string, mimeType?: string, signal?: AbortSignal): Promise<UploadedFile> {
    const size = typeof source === 'string' ? (await stat(source)).size : source.byteLength;
    if (size > MAX_UPLOAD_BYTES) throw new UploadTooLargeError(typeof source === 'string' ? source : 'the file', size, MAX_UPLOAD_BYTES);
    const bytes = typeof source === 'string' ? await readFile(source) : source;
    const type = mimeType ?? detectMimeType(bytes, typeof source === 'string' ? source : undefined);
    if (!type)
      throw new TesError(
        'unsupported_media_type',
        'cannot tell the MIME type of the upload: pass mimeType (image/png, image/jpeg, audio/wav, audio/mpeg, video/mp4)',
      );
    const data = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64');
    return (await this.http.request<Envelope<UploadedFile>>('POST', '/tools/upload', { body: { mimeType: type, data }, signal })).body.data;
  }

  /**
   * POST /tools/{tool}: reserves the quoted maximum. Lost connections and 5xx are resent
   * with the same key and body (the gateway replays the original execution); the money
   * 429s are thrown at once. A TesError thrown carries the key (`idempotencyKey`) and
   * `mayHaveBeenAccepted`: when true, submit again with the same key, never a new one.
   */
  async submit<T extends string>(tool: CheckedToolName<T>, args: ToolArguments<T>, options: SubmitOptions): Promise<SubmitResult> {
    if (!isValidIdempotencyKey(options.idempotencyKey)) {
      throw new TypeError('idempotencyKey must be 8-128 of letters, digits, ".", "_", ":" or "-"');
    }
    const body = { tool, arguments: args, priceVersion: options.priceVersion, maximumChargeMicros: options.maximumChargeMicros };
    const res = await this.http
      .request<Envelope<Execution>>('POST', `/tools/${encodeURIComponent(tool)}`, {
        body,
        headers: { 'Idempotency-Key': options.idempotencyKey },
        signal: options.signal,
        waitSeconds: options.waitSeconds,
      })
      .catch((err: unknown) => {
        throw markSubmitError(err, options.idempotencyKey);
      });
    return {
      execution: res.body.data,
      replayed: res.headers.get('idempotent-replayed') === 'true',
      retryAfterSeconds: parseRetryAfter(res.headers.get('retry-after')),
      preferenceApplied: res.headers.has('preference-applied'),
    };
  }

  /** GET /tools/executions/{id}. */
  async execution(id: string, signal?: AbortSignal): Promise<Execution> {
    return (await this.poll(id, signal)).execution;
  }

  /**
   * @internal GET /tools/executions/{id} with the Retry-After the gateway may ask for; with
   * `waitSeconds`, `Prefer: wait=N`, and whether the gateway said it waited for the end.
   */
  async poll(id: string, signal?: AbortSignal, waitSeconds?: number): Promise<PollResult> {
    const res = await this.http.request<Envelope<Execution>>('GET', `/tools/executions/${encodeURIComponent(id)}`, { signal, waitSeconds });
    return {
      execution: res.body.data,
      retryAfterSeconds: parseRetryAfter(res.headers.get('retry-after')),
      preferenceApplied: res.headers.has('preference-applied'),
    };
  }

  /**
   * GET /tools/executions/{id}/events: the execution after every change, as it happens, until
   * it ends; resumed with Last-Event-ID after a lost connection (see ExecutionEvents).
   *
   * ```ts
   * for await (const e of tes.events(id)) console.log(e.status, e.progress.completedSteps);
   * ```
   */
  events(id: string, options: EventsOptions = {}): ExecutionEvents {
    const deps = { open: this.http.open.bind(this.http), execution: this.execution.bind(this), retry: this.retry };
    return new ExecutionEvents(deps, id, options);
  }

  /** GET /tools/executions: newest first; pass `nextBefore` as `before` for the next page. */
  async executions(query: ExecutionQuery = {}, signal?: AbortSignal): Promise<ExecutionList> {
    const params = new URLSearchParams();
    // A JavaScript caller may pass null for "not set", which the declared type cannot.
    for (const [k, v] of Object.entries(query) as [string, ExecutionQuery[keyof ExecutionQuery] | null][])
      if (v !== undefined && v !== null) params.set(k, String(v));
    const qs = params.toString();
    return (await this.http.request<ExecutionList>('GET', `/tools/executions${qs ? `?${qs}` : ''}`, { signal })).body;
  }

  /** POST /tools/executions/{id}/cancel: queued ends at once; running gets cancelRequested. */
  async cancel(id: string, signal?: AbortSignal): Promise<Execution> {
    return (await this.http.request<Envelope<Execution>>('POST', `/tools/executions/${encodeURIComponent(id)}/cancel`, { signal })).body.data;
  }

  /** A presigned URL (≤ 300 s) for one artifact. The URL is private data: do not log it. */
  async downloadUrl(id: string, artifactId: string, signal?: AbortSignal): Promise<Download> {
    const path = `/tools/executions/${encodeURIComponent(id)}/artifacts/${encodeURIComponent(artifactId)}/download`;
    return (await this.http.request<Envelope<Download>>('GET', path, { signal })).body.data;
  }

  /**
   * The bytes of one artifact, checked against its size and sha256. A failed fetch asks for
   * a fresh URL each time (URLs expire). The object-storage request carries no API key.
   */
  async download(id: string, artifactId: string, signal?: AbortSignal): Promise<Buffer> {
    for (let attempt = 1; ; attempt++) {
      const link = await this.downloadUrl(id, artifactId, signal);
      let bytes: Buffer;
      try {
        // Deliberately no Authorization header: the URL is signed, and the key must not
        // travel to object storage.
        const res = await this.fetchFn(link.url, { method: 'GET', signal: signal ?? null, redirect: 'error' });
        if (!res.ok) {
          await res.body?.cancel();
          throw new TesError('artifact_download_failed', `artifact ${artifactId}: object storage answered HTTP ${res.status}`);
        }
        bytes = Buffer.from(await res.arrayBuffer());
      } catch (err) {
        if (signal?.aborted) throw signal.reason;
        if (attempt >= this.retry.maxAttempts) {
          throw err instanceof TesError ? err : new TesNetworkError(`artifact ${artifactId}: download failed after ${attempt} attempts`, { cause: err });
        }
        await sleep(backoffMs(attempt, this.retry), signal);
        continue;
      }
      const sha256 = createHash('sha256').update(bytes).digest('hex');
      if (bytes.length !== link.sizeBytes || sha256 !== link.sha256) {
        throw new ArtifactIntegrityError(
          `artifact ${artifactId}: got ${bytes.length} bytes with sha256 ${sha256}, expected ${link.sizeBytes} bytes with ${link.sha256}`,
        );
      }
      return bytes;
    }
  }

  /** GET /tools/project: organization, project, key, balance and cap of this key. */
  async project(signal?: AbortSignal): Promise<Project> {
    return (await this.http.request<Envelope<Project>>('GET', '/tools/project', { signal })).body.data;
  }

  /** GET /tools/usage: this UTC month's requests, settled executions and charges. */
  async usage(signal?: AbortSignal): Promise<Usage> {
    return (await this.http.request<Envelope<Usage>>('GET', '/tools/usage', { signal })).body.data;
  }

  /**
   * Quote, submit with a generated idempotency key (resent with the same key after a lost
   * connection), follow the execution until it ends (the event stream, else `Prefer: wait`,
   * else polling: RunOptions.strategy), and return it with download helpers.
   * Rejects with ExecutionUnsuccessfulError when it ends failed, cancelled or needs_review.
   *
   * ```ts
   * await tes.run('image.render', { text: 'Hello', width: 800 }); // arguments typed from the catalog
   * await tes.run(toolFromConfig as string, args); // a tool these types do not know: untyped
   * ```
   */
  run<T extends string>(tool: CheckedToolName<T>, args: ToolArguments<T>, options: RunOptions = {}): Promise<RunResult> {
    return runTool(this, tool, args, options);
  }
}
