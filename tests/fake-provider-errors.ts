/**
 * Error answers of the fake providers, shaped like the real ones (each validates against the
 * provider's error schema in tests/provider-contracts; SOURCES.md there says where the shapes
 * come from). Content types too: Replicate answers problem+json.
 */
export type FakeProvider = 'openai' | 'replicate' | 'fal';

export interface ErrorAnswer {
  status: number;
  body: unknown;
  headers: Record<string, string>;
}

const JSON_TYPE = { 'Content-Type': 'application/json' };

/** What each fake error says, by status: OpenAI's type and code, Replicate's title, fal's error type. */
const OPENAI: Record<number, { type: string; code: string | null; message: string }> = {
  400: { type: 'invalid_request_error', code: null, message: 'Invalid request.' },
  401: { type: 'invalid_request_error', code: 'invalid_api_key', message: 'Incorrect API key provided.' },
  429: { type: 'requests', code: 'rate_limit_exceeded', message: 'Rate limit reached for requests. Please try again in 1s.' },
  500: { type: 'server_error', code: null, message: 'The server had an error while processing your request. Sorry about that!' },
};
const FAL_PLATFORM: Record<number, string> = { 401: 'Unauthorized', 404: 'Not found', 429: 'Too many requests' };
const REPLICATE_TITLES: Record<number, string> = {
  401: 'Unauthenticated',
  404: 'Not found',
  422: 'Input validation failed',
  429: 'Request was throttled',
  500: 'Internal server error',
};

/**
 * A provider's own error answer. For fal, `errorType` makes it a request error (the
 * documented { detail, error_type } with X-Fal-Error-Type), `loc` a model error (detail as
 * a list of typed errors); neither, a platform answer ({ detail }) such as a refused key.
 */
export function providerError(
  provider: FakeProvider,
  status: number,
  message?: string,
  fal: { errorType?: string; loc?: string[]; type?: string } = {},
): ErrorAnswer {
  switch (provider) {
    case 'openai': {
      const e = OPENAI[status] ?? OPENAI[status >= 500 ? 500 : 400]!;
      return { status, body: { error: { message: message ?? e.message, type: e.type, param: null, code: e.code } }, headers: JSON_TYPE };
    }
    case 'replicate': {
      const title = REPLICATE_TITLES[status] ?? (status >= 500 ? 'Internal server error' : 'Bad request');
      return { status, body: { title, detail: message ?? title, status }, headers: { 'Content-Type': 'application/problem+json' } };
    }
    case 'fal': {
      if (fal.errorType) {
        return {
          status,
          body: { detail: message ?? fal.errorType, error_type: fal.errorType },
          headers: { ...JSON_TYPE, 'X-Fal-Error-Type': fal.errorType },
        };
      }
      if (fal.loc) {
        const type = fal.type ?? 'value_error';
        const detail = [{ loc: fal.loc, msg: message ?? type, type, url: `https://docs.fal.ai/errors#${type}` }];
        return { status, body: { detail }, headers: { ...JSON_TYPE, 'X-Fal-Retryable': 'false' } };
      }
      return { status, body: { detail: message ?? FAL_PLATFORM[status] ?? 'Error' }, headers: JSON_TYPE };
    }
  }
}

/**
 * How each API refuses a request body its schema does not allow: OpenAI 400
 * invalid_request_error, Replicate 422 problem, fal 422 with the typed errors of its models.
 */
export function invalidRequest(provider: FakeProvider, problems: string[]): ErrorAnswer {
  const message = problems.join('; ').slice(0, 500);
  if (provider === 'openai') return providerError('openai', 400, message);
  if (provider === 'replicate') return providerError('replicate', 422, message);
  return providerError('fal', 422, message, { loc: ['body'], type: 'value_error' });
}
