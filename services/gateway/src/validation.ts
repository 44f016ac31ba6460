import Ajv2020, { type ValidateFunction } from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import { AppError } from '@tes/core';

const ajv = new Ajv2020({ allErrors: true, strict: true, coerceTypes: false });
addFormats(ajv);

/** Compiles a request schema once; the returned check throws invalid_request with ajv's errors. */
export function compileCheck<T>(schema: Record<string, unknown>): (value: unknown) => T {
  const validate: ValidateFunction = ajv.compile(schema);
  return (value: unknown): T => {
    if (!validate(value)) {
      throw new AppError('invalid_request', 'invalid_request', {
        details: {
          errors: (validate.errors ?? []).slice(0, 20).map((e) => ({ instancePath: e.instancePath, keyword: e.keyword, message: e.message ?? e.keyword, params: e.params })),
        },
      });
    }
    return value as T;
  };
}

export const IDEMPOTENCY_KEY = /^[A-Za-z0-9._:-]{8,128}$/;
