/**
 * The stable error codes (docs/api.md#errors). Library code throws AppError with one of
 * these; the gateway maps code -> HTTP status and error.status in one exhaustive table.
 */
export const ERROR_CODES = [
  // 400 INVALID_ARGUMENT
  'invalid_json',
  'invalid_request',
  'invalid_arguments',
  'tool_mismatch',
  'idempotency_key_required',
  'idempotency_key_invalid',
  'unsupported_media_type',
  'invalid_base64',
  'file_content_mismatch',
  'file_too_large',
  'file_not_found',
  'request_too_large',
  // 400 FAILED_PRECONDITION
  'price_version_mismatch',
  'maximum_charge_insufficient',
  'execution_not_cancellable',
  // 401
  'platform_api_key_missing',
  'platform_api_key_invalid',
  'platform_api_key_expired',
  'platform_api_key_revoked',
  // 403
  'platform_api_key_scope_required',
  'platform_project_permission_required',
  'execution_cancel_not_allowed',
  // 404
  'route_not_found',
  'tool_not_found',
  'tool_unavailable',
  'model_unavailable',
  'execution_not_found',
  'artifact_not_found',
  'artifact_expired',
  'webhook_endpoint_not_found',
  // 405: the gateway's choice for a method a known path does not take (docs/api.md#errors)
  'method_not_allowed',
  // 409
  'idempotency_key_reused',
  // 429
  'rate_limit_exceeded',
  'insufficient_balance',
  'monthly_cap_exceeded',
  // 500
  'internal_error',
  // 503
  'execution_disabled',
  'service_unavailable',
] as const;

export type ErrorCode = (typeof ERROR_CODES)[number];

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

export function assertNever(value: never, what = 'value'): never {
  throw new Error(`unexpected ${what}: ${String(value)}`);
}
