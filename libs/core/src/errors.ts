/** The canonical status of an error envelope (error.status), as Google's API design names them. */
export type ErrorStatus =
  | 'INVALID_ARGUMENT'
  | 'FAILED_PRECONDITION'
  | 'UNAUTHENTICATED'
  | 'PERMISSION_DENIED'
  | 'NOT_FOUND'
  | 'ALREADY_EXISTS'
  | 'UNIMPLEMENTED'
  | 'RESOURCE_EXHAUSTED'
  | 'INTERNAL'
  | 'UNAVAILABLE';

/** What the contract says of one error code. */
export interface ErrorCodeFacts {
  /** The HTTP status the gateway answers with. */
  http: number;
  /** The envelope's error.status. */
  status: ErrorStatus;
  /** Whether the same request, sent again unchanged, can succeed later. */
  retryable: boolean;
  /** What it means for the caller, in one line (the console shows it). */
  description: string;
}

/**
 * The stable error codes (docs/api.md#errors) and what each means: their one owner. Library
 * code throws AppError with one of these; the gateway's httpFor answers with its http and
 * status; a test checks services/gateway/openapi.json against it (libs/testing
 * openapi-document.test.ts); `npm run generate:errors` writes what the SDK, the Python client
 * and the console need from it (clients/typescript/scripts/generate-error-codes.ts), and a test fails
 * while they are stale. A new code goes here, then regenerate.
 */
export const ERROR_TABLE = {
  // 400 INVALID_ARGUMENT
  invalid_json: { http: 400, status: 'INVALID_ARGUMENT', retryable: false, description: 'The request was not valid JSON.' },
  invalid_request: { http: 400, status: 'INVALID_ARGUMENT', retryable: false, description: 'The request’s shape was refused.' },
  invalid_arguments: { http: 400, status: 'INVALID_ARGUMENT', retryable: false, description: 'The input does not fit the tool’s schema.' },
  tool_mismatch: { http: 400, status: 'INVALID_ARGUMENT', retryable: false, description: 'The tool in the body differs from the one in the path.' },
  idempotency_key_required: { http: 400, status: 'INVALID_ARGUMENT', retryable: false, description: 'An Idempotency-Key header is required.' },
  idempotency_key_invalid: { http: 400, status: 'INVALID_ARGUMENT', retryable: false, description: 'The Idempotency-Key header is not valid.' },
  unsupported_media_type: { http: 400, status: 'INVALID_ARGUMENT', retryable: false, description: 'This kind of file is not accepted.' },
  invalid_base64: { http: 400, status: 'INVALID_ARGUMENT', retryable: false, description: 'The upload was not valid Base64.' },
  file_content_mismatch: { http: 400, status: 'INVALID_ARGUMENT', retryable: false, description: 'The file’s bytes are not the format its type declares.' },
  file_too_large: { http: 400, status: 'INVALID_ARGUMENT', retryable: false, description: 'The file is too large.' },
  file_not_found: { http: 400, status: 'INVALID_ARGUMENT', retryable: false, description: 'A file this input names is unknown to the project or has expired.' },
  // 413 INVALID_ARGUMENT
  request_too_large: { http: 413, status: 'INVALID_ARGUMENT', retryable: false, description: 'The request is too large.' },
  // 400 FAILED_PRECONDITION
  price_version_mismatch: { http: 400, status: 'FAILED_PRECONDITION', retryable: false, description: 'Prices changed since the quote; quote again.' },
  maximum_charge_insufficient: {
    http: 400,
    status: 'FAILED_PRECONDITION',
    retryable: false,
    description: 'The maximum charge is below the current quote; quote again.',
  },
  execution_not_cancellable: {
    http: 400,
    status: 'FAILED_PRECONDITION',
    retryable: false,
    description: 'This execution has ended and can no longer be cancelled.',
  },
  // 401
  platform_api_key_missing: { http: 401, status: 'UNAUTHENTICATED', retryable: false, description: 'No API key was sent.' },
  platform_api_key_invalid: { http: 401, status: 'UNAUTHENTICATED', retryable: false, description: 'This API key is not valid.' },
  platform_api_key_expired: { http: 401, status: 'UNAUTHENTICATED', retryable: false, description: 'This API key has expired.' },
  platform_api_key_revoked: { http: 401, status: 'UNAUTHENTICATED', retryable: false, description: 'This API key has been revoked.' },
  // 403
  platform_api_key_scope_required: { http: 403, status: 'PERMISSION_DENIED', retryable: false, description: 'This API key lacks the scope this needs.' },
  platform_project_permission_required: {
    http: 403,
    status: 'PERMISSION_DENIED',
    retryable: false,
    description: 'This API key may not do this in its project.',
  },
  execution_cancel_not_allowed: {
    http: 403,
    status: 'PERMISSION_DENIED',
    retryable: false,
    description: 'Only the key that started it, or an admin key, may cancel this execution.',
  },
  // 404
  route_not_found: { http: 404, status: 'NOT_FOUND', retryable: false, description: 'No such endpoint.' },
  tool_not_found: { http: 404, status: 'NOT_FOUND', retryable: false, description: 'No such tool.' },
  tool_unavailable: { http: 404, status: 'NOT_FOUND', retryable: false, description: 'This tool is not available on this deployment.' },
  model_unavailable: { http: 404, status: 'NOT_FOUND', retryable: false, description: 'This model is not available on this deployment.' },
  execution_not_found: { http: 404, status: 'NOT_FOUND', retryable: false, description: 'No such execution in this project.' },
  artifact_not_found: { http: 404, status: 'NOT_FOUND', retryable: false, description: 'No such file in this execution.' },
  artifact_expired: { http: 404, status: 'NOT_FOUND', retryable: false, description: 'This file has expired and was deleted.' },
  webhook_endpoint_not_found: { http: 404, status: 'NOT_FOUND', retryable: false, description: 'No such webhook endpoint in this project.' },
  // 405: the gateway's own code for a method a known path does not take (with an Allow header,
  // docs/api.md#errors). The canonical status is grpc-gateway's for the same case.
  method_not_allowed: { http: 405, status: 'UNIMPLEMENTED', retryable: false, description: 'This endpoint does not take this method.' },
  // 409
  idempotency_key_reused: { http: 409, status: 'ALREADY_EXISTS', retryable: false, description: 'This Idempotency-Key was already used for another request.' },
  // 429: only the rate limit passes with time; a money refusal needs a top-up or a higher cap
  rate_limit_exceeded: { http: 429, status: 'RESOURCE_EXHAUSTED', retryable: true, description: 'Too many requests; wait a moment and try again.' },
  insufficient_balance: {
    http: 429,
    status: 'RESOURCE_EXHAUSTED',
    retryable: false,
    description: 'The project’s available balance does not cover the maximum this run may cost.',
  },
  monthly_cap_exceeded: {
    http: 429,
    status: 'RESOURCE_EXHAUSTED',
    retryable: false,
    description: 'This run would take the project past its monthly spending cap.',
  },
  // 500
  internal_error: { http: 500, status: 'INTERNAL', retryable: true, description: 'The service failed unexpectedly.' },
  // 503: execution_disabled is an operator's switch, not a passing state
  execution_disabled: { http: 503, status: 'UNAVAILABLE', retryable: false, description: 'Running tools is switched off for now; nothing was reserved.' },
  service_unavailable: { http: 503, status: 'UNAVAILABLE', retryable: true, description: 'The service is temporarily unavailable; try again shortly.' },
} as const satisfies Record<string, ErrorCodeFacts>;

export type ErrorCode = keyof typeof ERROR_TABLE;

/** Every code, in the table's order. */
export const ERROR_CODES = Object.keys(ERROR_TABLE) as readonly ErrorCode[];

export interface AppErrorOptions {
  details?: Record<string, unknown>;
  /** Whether the same request may succeed later (surfaced as details.retryable on money 429s). */
  retryable?: boolean;
  cause?: unknown;
}

export class AppError extends Error {
  readonly code: ErrorCode;
  readonly details: Record<string, unknown> | undefined;
  readonly retryable: boolean;

  constructor(code: ErrorCode, message?: string, options: AppErrorOptions = {}) {
    super(message ?? code, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'AppError';
    this.code = code;
    this.details = options.details;
    this.retryable = options.retryable ?? false;
  }
}

export function isAppError(err: unknown): err is AppError {
  return err instanceof AppError;
}

/** Execution-level failure codes (execution.errorCode), snake_case per the contract. */
export type ExecutionErrorCode =
  | 'invalid_input_file'
  | 'provider_error'
  | 'provider_timeout'
  | 'step_limit_exceeded'
  | 'artifact_too_large'
  | 'step_timeout'
  /** a step's work needed more CPU or memory than its sandbox allows (an over-expensive input) */
  | 'resource_limit_exceeded'
  | 'delivery_limit_exceeded'
  | 'tool_unavailable'
  | 'internal_error';

/** Thrown by a tool step to fail its execution with a stable errorCode. */
export class StepError extends Error {
  readonly errorCode: ExecutionErrorCode;
  constructor(errorCode: ExecutionErrorCode, message: string) {
    super(message);
    this.name = 'StepError';
    this.errorCode = errorCode;
  }
}
