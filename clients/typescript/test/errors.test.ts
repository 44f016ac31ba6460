import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ERROR_CODES as CORE_CODES, type ErrorCode as CoreCode } from '@tes/core';
import { httpFor } from '../../../services/gateway/src/errors';
import {
  AuthenticationError,
  ERROR_CODES,
  ExecutionDisabledError,
  ExecutionUnsuccessfulError,
  FailedPreconditionError,
  IdempotencyConflictError,
  InsufficientBalanceError,
  InternalServerError,
  InvalidRequestError,
  MaximumChargeInsufficientError,
  MonthlyCapExceededError,
  NotFoundError,
  PermissionDeniedError,
  PriceVersionMismatchError,
  RateLimitedError,
  ServiceUnavailableError,
  TesAbortError,
  TesApiError,
  TesError,
  TesNetworkError,
  errorFromResponse,
  markSubmitError,
  parseRetryAfter,
  type Execution,
} from '../src';

/** Every `error.message` enum in the OpenAPI document. */
function documentedCodes(): string[] {
  const doc = JSON.parse(readFileSync(join(__dirname, '../../../services/gateway/openapi.json'), 'utf8')) as unknown;
  const codes = new Set<string>();
  const walk = (node: unknown): void => {
    if (Array.isArray(node)) return node.forEach(walk);
    if (typeof node !== 'object' || node === null) return;
    const message = (node as Record<string, unknown>).message as { enum?: string[] } | undefined;
    message?.enum?.forEach((c) => codes.add(c));
    Object.values(node).forEach(walk);
  };
  walk(doc);
  return [...codes].sort();
}

const EXPECTED: Record<CoreCode, new (...a: never[]) => TesApiError> = {
  invalid_json: InvalidRequestError,
  invalid_request: InvalidRequestError,
  invalid_arguments: InvalidRequestError,
  tool_mismatch: InvalidRequestError,
  idempotency_key_required: InvalidRequestError,
  idempotency_key_invalid: InvalidRequestError,
  unsupported_media_type: InvalidRequestError,
  invalid_base64: InvalidRequestError,
  file_content_mismatch: InvalidRequestError,
  file_too_large: InvalidRequestError,
  file_not_found: InvalidRequestError,
  request_too_large: InvalidRequestError,
  price_version_mismatch: PriceVersionMismatchError,
  maximum_charge_insufficient: MaximumChargeInsufficientError,
  execution_not_cancellable: FailedPreconditionError,
  platform_api_key_missing: AuthenticationError,
  platform_api_key_invalid: AuthenticationError,
  platform_api_key_expired: AuthenticationError,
  platform_api_key_revoked: AuthenticationError,
  platform_api_key_scope_required: PermissionDeniedError,
  platform_project_permission_required: PermissionDeniedError,
  execution_cancel_not_allowed: PermissionDeniedError,
  route_not_found: NotFoundError,
  tool_not_found: NotFoundError,
  tool_unavailable: NotFoundError,
  model_unavailable: NotFoundError,
  execution_not_found: NotFoundError,
  artifact_not_found: NotFoundError,
  artifact_expired: NotFoundError,
  webhook_endpoint_not_found: NotFoundError,
  method_not_allowed: NotFoundError,
  idempotency_key_reused: IdempotencyConflictError,
  rate_limit_exceeded: RateLimitedError,
  insufficient_balance: InsufficientBalanceError,
  monthly_cap_exceeded: MonthlyCapExceededError,
  internal_error: InternalServerError,
  execution_disabled: ExecutionDisabledError,
  service_unavailable: ServiceUnavailableError,
};

const headers = (h: Record<string, string> = {}): Headers => new Headers(h);

describe('error codes', () => {
  it('the client names exactly the codes the OpenAPI document and the server use', () => {
    expect([...ERROR_CODES].sort()).toEqual(documentedCodes());
    expect([...ERROR_CODES].sort()).toEqual([...CORE_CODES].sort());
  });

  it.each(CORE_CODES.map((c) => [c]))('%s maps to its typed error with status, code, details and request id', (code) => {
    const { http, status } = httpFor(code);
    const err = errorFromResponse(http, { error: { status, message: code, details: { x: 1 } } }, headers({ 'X-Request-Id': 'req-1' }));
    expect(err).toBeInstanceOf(EXPECTED[code]);
    expect(err).toBeInstanceOf(TesApiError);
    expect(err).toBeInstanceOf(TesError);
    expect(err.constructor).toBe(EXPECTED[code]);
    expect([err.status, err.errorStatus, err.code, err.details, err.requestId]).toEqual([http, status, code, { x: 1 }, 'req-1']);
    // A sentence first (error-sentences.test.ts), then the stable code, the status and the request id.
    expect(err.message).toMatch(new RegExp(`^[^_]+ \\(${code}, HTTP ${http}, request req-1\\)$`));
    expect(err.name).toBe(EXPECTED[code].name);
    // Only 5xx other than execution_disabled are resent as they are.
    expect(err.retryable).toBe(http >= 500 && code !== 'execution_disabled');
    // A submit ending in it may have been accepted unless the gateway refused after finding no
    // execution bound to the key (every 4xx but the rate limit, which comes before that lookup)
    expect([err.idempotencyKey, err.mayHaveBeenAccepted]).toEqual([undefined, false]);
    markSubmitError(err, 'key-12345');
    expect([err.idempotencyKey, err.mayHaveBeenAccepted]).toEqual([
      'key-12345',
      (http >= 500 && code !== 'execution_disabled') || code === 'rate_limit_exceeded',
    ]);
  });

  it('a submit without a definite answer (no answer, an abort, an answer that is not JSON) may have been accepted; one that named its execution is known', () => {
    for (const err of [
      new TesNetworkError('no answer'),
      new TesAbortError(undefined, new Error('x')),
      new TesError('invalid_response', 'HTTP 202 without JSON'),
    ]) {
      expect([err.code, markSubmitError(err, 'key-12345').mayHaveBeenAccepted, err.idempotencyKey]).toEqual([err.code, true, 'key-12345']);
    }
    const after = new TesAbortError('exe_1', new Error('x'));
    expect([markSubmitError(after, 'key-12345').mayHaveBeenAccepted, after.idempotencyKey]).toEqual([false, 'key-12345']);
    const other = new TypeError('not ours');
    expect(markSubmitError(other, 'key-12345')).toBe(other);
  });
});

describe('errorFromResponse', () => {
  it('reads Retry-After in seconds or as an HTTP date; money 429s have none and are not retryable', () => {
    const rl = errorFromResponse(429, { error: { status: 'RESOURCE_EXHAUSTED', message: 'rate_limit_exceeded' } }, headers({ 'Retry-After': '17' }));
    expect(rl).toBeInstanceOf(RateLimitedError);
    expect(rl.retryAfterSeconds).toBe(17);
    const money = errorFromResponse(
      429,
      { error: { status: 'RESOURCE_EXHAUSTED', message: 'insufficient_balance', details: { retryable: false } } },
      headers(),
    );
    expect([money.retryAfterSeconds, money.retryable]).toEqual([undefined, false]);
    expect(parseRetryAfter(new Date(Date.UTC(2030, 0, 1, 0, 0, 30)).toUTCString(), Date.UTC(2030, 0, 1))).toBe(30);
    expect(parseRetryAfter('soon')).toBeUndefined();
    expect(parseRetryAfter(null)).toBeUndefined();
  });

  it('a body that is not the envelope still gives a typed error named by the HTTP status', () => {
    const proxy = errorFromResponse(502, undefined, headers());
    expect(proxy).toBeInstanceOf(ServiceUnavailableError);
    expect([proxy.code, proxy.retryable]).toEqual(['http_502', true]);
    const odd = errorFromResponse(418, { error: 'teapot' }, headers());
    expect(odd.constructor).toBe(TesApiError);
    expect(odd.code).toBe('http_418');
    const unknown429 = errorFromResponse(429, { error: { status: 'RESOURCE_EXHAUSTED', message: 'something_new' } }, headers());
    expect(unknown429).not.toBeInstanceOf(RateLimitedError); // an unknown 429 is never waited out
  });

  it('an unsuccessful execution is an error whose code is the errorCode, carrying the charge', () => {
    const e = { id: 'exe_1', status: 'failed', errorCode: 'provider_error', chargedMicros: 7 } as Execution;
    const err = new ExecutionUnsuccessfulError(e);
    expect([err.code, err.execution]).toEqual(['provider_error', e]);
    expect(err.message).toContain('charged 7 micros');
    expect(new ExecutionUnsuccessfulError({ ...e, status: 'needs_review', errorCode: null }).code).toBe('execution_needs_review');
  });
});
