import { ERROR_TABLE, type ErrorCode, type ErrorStatus } from '@tes/core';

/** An error code's HTTP status and error.status, as libs/core's ERROR_TABLE (their one owner) says. */
export function httpFor(code: ErrorCode): { http: number; status: ErrorStatus } {
  const { http, status } = ERROR_TABLE[code];
  return { http, status };
}
