/**
 * Postgres error classification, kept inside libs/db so callers see meanings, not SQLSTATEs.
 */
export function pgCode(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}

export function isUniqueViolation(err: unknown): boolean {
  return pgCode(err) === '23505';
}

/** Serialization failure or deadlock: the transaction may be retried as a whole. */
export function isRetryableTransactionError(err: unknown): boolean {
  const code = pgCode(err);
  return code === '40001' || code === '40P01';
}

/** Connection-level failures: the database is unreachable or restarting. */
export function isConnectionError(err: unknown): boolean {
  const code = pgCode(err);
  if (code && (code.startsWith('08') || code === '57P01' || code === '57P02' || code === '57P03')) return true;
  // not `instanceof Error`: errors from another realm (node's own, seen from a vm context such as jest's) fail it
  const message = (err as { message?: unknown } | null)?.message;
  const msg = typeof message === 'string' ? message : '';
  return /ECONNREFUSED|ECONNRESET|Connection terminated|timeout exceeded when trying to connect|Knex: Timeout acquiring/i.test(msg);
}
