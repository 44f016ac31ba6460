import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { inspect } from 'node:util';
import { errorFromResponse, InvalidRequestError } from '../src';

/**
 * An SDK exception says what went wrong in one line, with the amounts and limits from the
 * answer's details (issue #29: it printed `insufficient_balance (HTTP 429, request …)` and left
 * the amounts in `.details`). The code, the HTTP status and the request id stay at its end.
 */
const api = (status: number, errorStatus: string, code: string, details?: object, headers: Record<string, string> = {}) =>
  errorFromResponse(
    status,
    { error: { status: errorStatus, message: code, ...(details ? { details } : {}) } },
    new Headers({ 'x-request-id': 'req_1', ...headers }),
  );

it('money refusals name what the request needs and what the project has', () => {
  expect(api(429, 'RESOURCE_EXHAUSTED', 'insufficient_balance', { requiredMicros: 70_000, availableMicros: 10_000, retryable: false }).message).toBe(
    'insufficient balance: the submit needs $0.07 reserved and the project has $0.01 available (insufficient_balance, HTTP 429, request req_1)',
  );
  expect(api(429, 'RESOURCE_EXHAUSTED', 'monthly_cap_exceeded', { requiredMicros: 600_000 }).message).toBe(
    "monthly cap reached: the submit needs $0.60 reserved, more than the project's monthly cap leaves (monthly_cap_exceeded, HTTP 429, request req_1)",
  );
  expect(api(400, 'FAILED_PRECONDITION', 'maximum_charge_insufficient', { requiredMaximumChargeMicros: 1_200 }).message).toBe(
    'maximum charge too low: this input now needs up to $0.0012; quote again (maximum_charge_insufficient, HTTP 400, request req_1)',
  );
  expect(api(400, 'FAILED_PRECONDITION', 'price_version_mismatch', { currentPriceVersion: '2026-11-26.1' }).message).toBe(
    'the prices changed since the quote (now 2026-11-26.1); quote again (price_version_mismatch, HTTP 400, request req_1)',
  );
  expect(api(429, 'RESOURCE_EXHAUSTED', 'rate_limit_exceeded', undefined, { 'retry-after': '7' }).message).toBe(
    'too many requests: try again in 7 s (rate_limit_exceeded, HTTP 429, request req_1)',
  );
});

it('size refusals name the limit', () => {
  expect(api(413, 'INVALID_ARGUMENT', 'request_too_large', { limitBytes: 65_536 }).message).toBe(
    'the request is too large: the gateway takes at most 64 KiB (65,536 bytes) (request_too_large, HTTP 413, request req_1)',
  );
  expect(api(400, 'INVALID_ARGUMENT', 'file_too_large', { maxBytes: 12 * 1024 * 1024 }).message).toBe(
    'the file is too large: an upload is at most 12 MiB (12,582,912 bytes) (file_too_large, HTTP 400, request req_1)',
  );
});

it('invalid arguments say the gateway hint, or each problem by its field', () => {
  const hinted = api(400, 'INVALID_ARGUMENT', 'invalid_arguments', {
    errors: [{ instancePath: '', keyword: 'additionalProperties', message: 'must NOT have additional properties', params: { additionalProperty: 'txt' } }],
    hint: 'arguments.txt is not a property of audio.speech; did you mean text?',
  });
  expect(hinted.message).toBe(
    'invalid arguments: arguments.txt is not a property of audio.speech; did you mean text? (invalid_arguments, HTTP 400, request req_1)',
  );
  // An older gateway: no hint, the problems by their paths.
  const plain = api(400, 'INVALID_ARGUMENT', 'invalid_request', {
    errors: [
      { instancePath: '/maximumChargeMicros', message: 'must be integer' },
      { instancePath: '', message: 'must NOT have additional properties', params: { additionalProperty: 'extra' } },
    ],
  });
  expect(plain.message).toBe(
    'invalid request: maximumChargeMicros must be integer; arguments must NOT have additional properties: extra (invalid_request, HTTP 400, request req_1)',
  );
  expect(plain.message).not.toContain('\n');
});

it('other codes read as words; a code without details still names itself', () => {
  expect(api(403, 'PERMISSION_DENIED', 'platform_api_key_scope_required', { requiredScope: 'usage:read' }).message).toBe(
    'this API key lacks the scope usage:read (platform_api_key_scope_required, HTTP 403, request req_1)',
  );
  expect(api(503, 'UNAVAILABLE', 'service_unavailable').message).toBe('service unavailable (service_unavailable, HTTP 503, request req_1)');
});

it('an uncaught validation error prints every problem, not [Object]', () => {
  const err = api(400, 'INVALID_ARGUMENT', 'invalid_arguments', {
    errors: [
      { instancePath: '/slides/0', keyword: 'additionalProperties', message: 'must NOT have additional properties', params: { additionalProperty: 'txt' } },
      { instancePath: '/format', keyword: 'enum', message: 'must be equal to one of the allowed values', params: { allowedValues: ['png', 'jpeg'] } },
    ],
  });
  expect(err).toBeInstanceOf(InvalidRequestError);
  const printed = inspect(err);
  expect(printed).not.toContain('[Object]');
  expect(printed).toContain("additionalProperty: 'txt'");
  expect(printed).toContain("allowedValues: [ 'png', 'jpeg' ]");
  expect(printed).toContain('InvalidRequestError: invalid arguments:');
  expect(String(err)).toContain('InvalidRequestError: invalid arguments: slides[0] must NOT have additional properties: txt');
});

interface Case {
  status: number;
  errorStatus: string;
  code: string;
  details?: object;
  retryAfter?: string;
  message: string;
}

it('says every case of the table the Python client is checked against, word for word', () => {
  const table = JSON.parse(readFileSync(join(__dirname, '../../../clients/python/tests/error_sentences.json'), 'utf8')) as { cases: Case[] };
  for (const c of table.cases) {
    const err = api(c.status, c.errorStatus, c.code, c.details, c.retryAfter ? { 'retry-after': c.retryAfter } : {});
    expect([c.code, err.message]).toEqual([c.code, c.message]);
  }
});
