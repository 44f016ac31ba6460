import { ApiError } from '../api';
import { usd } from '../format';

/** What each code means for the person at the console, in words. */
const WORDS: Record<string, string> = {
  network_error: 'The service could not be reached.',
  unexpected_response: 'The service answered with something that is not the API’s JSON.',
  invalid_json: 'The request was not valid JSON.',
  invalid_request: 'The request’s shape was refused.',
  invalid_arguments: 'The input does not fit the tool’s schema.',
  tool_mismatch: 'The tool in the body differs from the one in the path.',
  idempotency_key_required: 'An Idempotency-Key header is required.',
  idempotency_key_invalid: 'The Idempotency-Key header is not valid.',
  unsupported_media_type: 'This kind of file is not accepted.',
  invalid_base64: 'The upload was not valid Base64.',
  file_content_mismatch: 'The file’s bytes are not the format its type declares.',
  file_too_large: 'The file is too large.',
  file_not_found: 'A file this input names is unknown to the project or has expired.',
  request_too_large: 'The request is too large.',
  price_version_mismatch: 'Prices changed since the quote; quote again.',
  maximum_charge_insufficient: 'The maximum charge is below the current quote; quote again.',
  execution_not_cancellable: 'This execution has ended and can no longer be cancelled.',
  platform_api_key_missing: 'No API key was sent.',
  platform_api_key_invalid: 'This API key is not valid.',
  platform_api_key_expired: 'This API key has expired.',
  platform_api_key_revoked: 'This API key has been revoked.',
  platform_api_key_scope_required: 'This API key lacks the scope this needs.',
  platform_project_permission_required: 'This API key may not do this in its project.',
  execution_cancel_not_allowed: 'Only the key that started it, or an admin key, may cancel this execution.',
  route_not_found: 'No such endpoint.',
  tool_not_found: 'No such tool.',
  tool_unavailable: 'This tool is not available on this deployment.',
  model_unavailable: 'This model is not available on this deployment.',
  execution_not_found: 'No such execution in this project.',
  artifact_not_found: 'No such file in this execution.',
  artifact_expired: 'This file has expired and was deleted.',
  webhook_endpoint_not_found: 'No such webhook endpoint in this project.',
  idempotency_key_reused: 'This Idempotency-Key was already used for another request.',
  rate_limit_exceeded: 'Too many requests; wait a moment and try again.',
  insufficient_balance: 'The project’s available balance does not cover the maximum this run may cost.',
  monthly_cap_exceeded: 'This run would take the project past its monthly spending cap.',
  internal_error: 'The service failed unexpectedly.',
  execution_disabled: 'Running tools is switched off for now; nothing was reserved.',
  service_unavailable: 'The service is temporarily unavailable; try again shortly.',
};

function detailValue(key: string, value: unknown): string {
  if (typeof value === 'number' && key.endsWith('Micros')) return `${usd(value)} (${value.toLocaleString('en-US')} micros)`;
  if (typeof value === 'string') return value;
  return JSON.stringify(value);
}

/** An error envelope in words: what it means, its code and status, and every detail. */
export function ErrorBox(props: { error: unknown; compact?: boolean; title?: string }) {
  const err = props.error;
  if (!(err instanceof ApiError)) {
    return (
      <div class="error-box" role="alert">
        <p class="error-title">{props.title ?? 'Something went wrong.'}</p>
        <p>{err instanceof Error ? err.message : String(err)}</p>
      </div>
    );
  }
  const { message, status, details } = err.body;
  const entries = Object.entries(details ?? {}).filter(([k]) => k !== 'errors' || !Array.isArray(details?.errors));
  const fieldErrors = Array.isArray(details?.errors) ? (details.errors as { instancePath?: string; message?: string }[]) : [];
  return (
    <div class={`error-box${props.compact ? ' compact' : ''}`} role="alert" data-code={message}>
      <p class="error-title">
        {props.title ? `${props.title}: ` : ''}
        {WORDS[message] ?? 'The request was refused.'}
      </p>
      <p class="error-code">
        <code>{message}</code> · {status}
        {err.httpStatus ? ` · HTTP ${err.httpStatus}` : ''}
      </p>
      {entries.length > 0 && (
        <dl class="details">
          {entries.map(([k, v]) => (
            <div key={k}>
              <dt>{k}</dt>
              <dd>{detailValue(k, v)}</dd>
            </div>
          ))}
        </dl>
      )}
      {fieldErrors.length > 0 && (
        <ul class="details">
          {fieldErrors.map((e, i) => (
            <li key={i}>
              <code>{e.instancePath || '/'}</code> {e.message}
            </li>
          ))}
        </ul>
      )}
      {err.requestId && !props.compact && <p class="request-id">Request id {err.requestId}</p>}
    </div>
  );
}
