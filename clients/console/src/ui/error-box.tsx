import { ApiError } from '../api';
import { usd } from '../format';
import { ERROR_DESCRIPTIONS } from './error-descriptions';

/** What each code means for the person at the console, in words (the API's codes from libs/core, generated). */
const WORDS: Record<string, string> = {
  network_error: 'The service could not be reached.',
  unexpected_response: 'The service answered with something that is not the API’s JSON.',
  ...ERROR_DESCRIPTIONS,
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
