import type { ErrorCode } from '@tes/core';
import { assertNever } from '@tes/core';

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

/** The one table that maps an error code to its HTTP status and error.status (docs/api.md#errors). */
export function httpFor(code: ErrorCode): { http: number; status: ErrorStatus } {
  switch (code) {
    case 'invalid_json':
    case 'invalid_request':
    case 'invalid_arguments':
    case 'tool_mismatch':
    case 'idempotency_key_required':
    case 'idempotency_key_invalid':
    case 'unsupported_media_type':
    case 'invalid_base64':
    case 'file_content_mismatch':
    case 'file_too_large':
    case 'file_not_found':
      return { http: 400, status: 'INVALID_ARGUMENT' };
    case 'request_too_large':
      return { http: 413, status: 'INVALID_ARGUMENT' };
    case 'price_version_mismatch':
    case 'maximum_charge_insufficient':
    case 'execution_not_cancellable':
      return { http: 400, status: 'FAILED_PRECONDITION' };
    case 'platform_api_key_missing':
    case 'platform_api_key_invalid':
    case 'platform_api_key_expired':
    case 'platform_api_key_revoked':
      return { http: 401, status: 'UNAUTHENTICATED' };
    case 'platform_api_key_scope_required':
    case 'platform_project_permission_required':
    case 'execution_cancel_not_allowed':
      return { http: 403, status: 'PERMISSION_DENIED' };
    case 'route_not_found':
    case 'tool_not_found':
    case 'tool_unavailable':
    case 'model_unavailable':
    case 'execution_not_found':
    case 'artifact_not_found':
    case 'artifact_expired':
    case 'webhook_endpoint_not_found':
      return { http: 404, status: 'NOT_FOUND' };
    // The gateway's own code for a method the path does not take (with an Allow header). The
    // canonical status is grpc-gateway's for the same case (a routing 405 is UNIMPLEMENTED).
    case 'method_not_allowed':
      return { http: 405, status: 'UNIMPLEMENTED' };
    case 'idempotency_key_reused':
      return { http: 409, status: 'ALREADY_EXISTS' };
    case 'rate_limit_exceeded':
    case 'insufficient_balance':
    case 'monthly_cap_exceeded':
      return { http: 429, status: 'RESOURCE_EXHAUSTED' };
    case 'internal_error':
      return { http: 500, status: 'INTERNAL' };
    case 'execution_disabled':
    case 'service_unavailable':
      return { http: 503, status: 'UNAVAILABLE' };
    default:
      return assertNever(code, 'error code');
  }
}
