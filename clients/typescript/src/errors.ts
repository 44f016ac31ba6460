import { apiErrorSentence } from './error-words';
import { byteSize } from './money';
import type { ErrorCode } from './error-codes';
import type { Execution } from './types';

/** The codes are generated from the server's own table (libs/core); a test keeps them current. */
export { ERROR_CODES, type ErrorCode } from './error-codes';

/** Base of everything this package throws; `code` is stable and snake_case. */
export class TesError extends Error {
  readonly code: string;
  /** Set by run() on errors after the submit was accepted: that execution exists and may be charged. */
  executionId: string | undefined;
  /**
   * The Idempotency-Key of the paid submit this error belongs to (set by submit() and run(),
   * run's generated key included). Submitting the same tool, arguments and quote again with this
   * key is always safe: the gateway answers with the execution the key made, if any, and never
   * reserves twice. A new key (a plain rerun) can pay twice.
   */
  idempotencyKey: string | undefined;
  /**
   * True when the submit got no definite answer: no answer after every resend, a 5xx, a timeout
   * or an abort while it was sent, an answer that was not JSON. An execution may then exist and
   * hold money without `executionId` naming it: resend with `idempotencyKey` to learn which.
   */
  mayHaveBeenAccepted = false;
  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
  }
}

export interface ApiErrorInit {
  /** HTTP status of the response. */
  status: number;
  /** `error.status` of the envelope, e.g. RESOURCE_EXHAUSTED (empty for a non-JSON answer). */
  errorStatus: string;
  /** `error.message`: the stable code. */
  code: string;
  details: Record<string, unknown> | undefined;
  requestId: string | undefined;
  retryAfterSeconds: number | undefined;
}

/**
 * An error answer of the API. The message is one line: what went wrong with the amounts and
 * limits of its details ("insufficient balance: the submit needs $0.07 reserved and the project
 * has $0.01 available"), then the code, the HTTP status and the request id. Never the API key,
 * a request body or a download URL. Printed uncaught (util.inspect), it shows its details in
 * full rather than `[Object]`.
 */
export class TesApiError extends TesError {
  override readonly code: ErrorCode | (string & {});
  readonly status: number;
  readonly errorStatus: string;
  readonly details: Record<string, unknown> | undefined;
  readonly requestId: string | undefined;
  readonly retryAfterSeconds: number | undefined;

  constructor(init: ApiErrorInit) {
    const sentence = apiErrorSentence(init.code, init.details ?? {}, init.retryAfterSeconds);
    super(init.code, `${sentence} (${init.code}, HTTP ${init.status}${init.requestId ? `, request ${init.requestId}` : ''})`);
    this.code = init.code;
    this.status = init.status;
    this.errorStatus = init.errorStatus;
    this.details = init.details;
    this.requestId = init.requestId;
    this.retryAfterSeconds = init.retryAfterSeconds;
  }

  /**
   * How Node prints it (an uncaught error, console.log): the stack, then code, status, request id
   * and every detail at any depth; the default stops at depth 2 and shows ajv's errors as
   * `[Object]`.
   */
  [Symbol.for('nodejs.util.inspect.custom')](_depth: number, options: object, inspect: (value: unknown, options: object) => string): string {
    const fields = { code: this.code, status: this.status, requestId: this.requestId, details: this.details };
    return `${this.stack ?? `${this.name}: ${this.message}`}\n${inspect(fields, { ...options, depth: null, breakLength: 100 })}`;
  }

  /** Whether sending the same request again can succeed (5xx other than execution_disabled). */
  get retryable(): boolean {
    return this.status >= 500 && this.code !== 'execution_disabled';
  }
}

/** 400/413 INVALID_ARGUMENT: fix the request (details.errors lists schema problems). */
export class InvalidRequestError extends TesApiError {}
/** 400 FAILED_PRECONDITION. */
export class FailedPreconditionError extends TesApiError {}
/** The price list changed since the quote: quote again (details.currentPriceVersion). */
export class PriceVersionMismatchError extends FailedPreconditionError {}
/** maximumChargeMicros is below the current quote (details.requiredMaximumChargeMicros). */
export class MaximumChargeInsufficientError extends FailedPreconditionError {}
/** 401: missing, invalid, expired or revoked key. */
export class AuthenticationError extends TesApiError {}
/** 403: missing scope (details.requiredScope) or project permission. */
export class PermissionDeniedError extends TesApiError {}
/** 404: unknown route, tool, execution or artifact, or an unavailable tool or model; 405: a method the route does not take. */
export class NotFoundError extends TesApiError {}
/** 409: the idempotency key was used with another body or by another key of the project. */
export class IdempotencyConflictError extends TesApiError {}
/** 429 for the request rate: may be retried after `retryAfterSeconds`. */
export class RateLimitedError extends TesApiError {}
/** 429 money refusal: not enough available balance. Retrying cannot help; never retried. */
export class InsufficientBalanceError extends TesApiError {}
/** 429 money refusal: the monthly cap would be exceeded. Retrying cannot help; never retried. */
export class MonthlyCapExceededError extends TesApiError {}
/** 500. */
export class InternalServerError extends TesApiError {}
/** 503 (and other 5xx): temporarily unavailable. */
export class ServiceUnavailableError extends TesApiError {}
/** 503 execution_disabled: execution is switched off catalog-wide; nothing was reserved. */
export class ExecutionDisabledError extends ServiceUnavailableError {}

/** The request never got an HTTP answer (connection refused or lost, DNS, TLS), after retries. */
export class TesNetworkError extends TesError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('network_error', message, options);
  }
}

/**
 * The event stream cannot be used from here: the server does not offer it (an older
 * gateway), or something between answers with another content type or holds the events
 * back (a buffering proxy: no first event in time). run({ strategy: 'auto' }) then waits
 * with `Prefer: wait` instead; events() and run({ strategy: 'stream' }) throw it.
 */
export class StreamUnavailableError extends TesError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('stream_unavailable', message, options);
  }
}

/** run() ended on a status other than succeeded; `execution` tells what was charged. */
export class ExecutionUnsuccessfulError extends TesError {
  readonly execution: Execution;
  constructor(execution: Execution) {
    const code = execution.status === 'failed' ? (execution.errorCode ?? 'execution_failed') : `execution_${execution.status}`;
    super(
      code,
      `execution ${execution.id} ended ${execution.status}${execution.errorCode ? ` (${execution.errorCode})` : ''}, charged ${execution.chargedMicros} micros`,
    );
    this.execution = execution;
  }
}

/** Downloaded bytes do not match the artifact's size or sha256. */
export class ArtifactIntegrityError extends TesError {
  constructor(message: string) {
    super('artifact_integrity', message);
  }
}

/** A file above MAX_UPLOAD_BYTES: refused by upload() before anything was sent. */
export class UploadTooLargeError extends TesError {
  /** @public */
  readonly sizeBytes: number;
  /** @public */
  readonly maxBytes: number;
  constructor(what: string, sizeBytes: number, maxBytes: number) {
    super('file_too_large', `${what} is ${byteSize(sizeBytes)}; an upload is at most ${byteSize(maxBytes)}; nothing was sent`);
    this.sizeBytes = sizeBytes;
    this.maxBytes = maxBytes;
  }
}

/** The quote is above the maximum the caller allowed for run(); nothing was submitted. */
export class QuoteAboveMaximumError extends TesError {
  /** @public */
  readonly quotedMaximumMicros: number;
  /** @public */
  readonly allowedMaximumMicros: number;
  constructor(quoted: number, allowed: number) {
    super('quote_above_maximum', `the quote's maximum ${quoted} micros is above the allowed ${allowed} micros; nothing was submitted`);
    this.quotedMaximumMicros = quoted;
    this.allowedMaximumMicros = allowed;
  }
}

/**
 * The caller's AbortSignal fired. When it fired after the submit was accepted the
 * execution goes on (and may be charged): `executionId` says which one to poll or cancel.
 */
export class TesAbortError extends TesError {
  constructor(executionId: string | undefined, cause: unknown) {
    super('aborted', executionId ? `aborted while waiting for ${executionId}; the execution continues on the server` : 'aborted', { cause });
    this.executionId = executionId;
  }
}

/**
 * Marks an error a submit sent with `idempotencyKey` ended in: the key, and whether the submit
 * may still have been accepted. Only the gateway's refusal says it was not: a 4xx or 503
 * execution_disabled, which it answers only after finding no execution bound to the key (a
 * resend of an accepted submit is answered with that execution instead). A 429
 * rate_limit_exceeded comes before that lookup: after an earlier send lost its answer, the
 * submit may have been accepted.
 */
export function markSubmitError<E>(err: E, idempotencyKey: string): E {
  if (!(err instanceof TesError)) return err;
  err.idempotencyKey ??= idempotencyKey;
  if (err.executionId === undefined) {
    err.mayHaveBeenAccepted = !(err instanceof TesApiError) || (err.status >= 500 && err.code !== 'execution_disabled') || err.code === 'rate_limit_exceeded';
  }
  return err;
}

type ApiErrorClass = new (init: ApiErrorInit) => TesApiError;

const BY_CODE: Partial<Record<string, ApiErrorClass>> = {
  price_version_mismatch: PriceVersionMismatchError,
  maximum_charge_insufficient: MaximumChargeInsufficientError,
  idempotency_key_reused: IdempotencyConflictError,
  rate_limit_exceeded: RateLimitedError,
  insufficient_balance: InsufficientBalanceError,
  monthly_cap_exceeded: MonthlyCapExceededError,
  execution_disabled: ExecutionDisabledError,
};

function classFor(status: number, errorStatus: string, code: string): ApiErrorClass {
  const exact = BY_CODE[code];
  if (exact) return exact;
  if (status === 400 && errorStatus === 'FAILED_PRECONDITION') return FailedPreconditionError;
  if (status === 400 || status === 413) return InvalidRequestError;
  if (status === 401) return AuthenticationError;
  if (status === 403) return PermissionDeniedError;
  if (status === 404 || status === 405) return NotFoundError;
  if (status === 409) return IdempotencyConflictError;
  if (status === 500) return InternalServerError;
  if (status > 500) return ServiceUnavailableError;
  return TesApiError;
}

/** Seconds from a Retry-After header (delta-seconds or an HTTP date); undefined when absent or bad. */
export function parseRetryAfter(value: string | null | undefined, now = Date.now()): number | undefined {
  if (value === null || value === undefined || value.trim() === '') return undefined;
  if (/^\d+$/.test(value.trim())) return Number(value.trim());
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, Math.ceil((at - now) / 1000));
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * The typed error for an HTTP error answer. A body that is not the API's envelope (a proxy's
 * HTML page, say) still gives a TesApiError, with the code `http_<status>`.
 */
export function errorFromResponse(status: number, body: unknown, headers: { get(name: string): string | null }): TesApiError {
  const envelope = isRecord(body) && isRecord(body.error) ? body.error : undefined;
  const code = typeof envelope?.message === 'string' ? envelope.message : `http_${status}`;
  const errorStatus = typeof envelope?.status === 'string' ? envelope.status : '';
  const init: ApiErrorInit = {
    status,
    errorStatus,
    code,
    details: isRecord(envelope?.details) ? envelope.details : undefined,
    requestId: headers.get('x-request-id') ?? undefined,
    retryAfterSeconds: parseRetryAfter(headers.get('retry-after')),
  };
  return new (classFor(status, errorStatus, code))(init);
}
