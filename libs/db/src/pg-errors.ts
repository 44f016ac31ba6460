/**
 * Postgres error classification, kept inside libs/db so callers see meanings, not SQLSTATEs.
 */
function pgCode(err: unknown): string | undefined {
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

/**
 * The database cannot be reached for now: connection failures, shutdown or recovery
 * (57P01-57P03), a read-only server after a failover (25006).
 */
export function isUnreachableError(err: unknown): boolean {
  return isConnectionError(err) || pgCode(err) === '25006';
}

/**
 * A bound on waiting was reached (DbTimeouts): a statement ran past statement_timeout or was
 * cancelled (57014), waited past lock_timeout (55P03), or its session sat idle in a transaction
 * past idle_in_transaction_session_timeout (25P03, the connection is gone). Nothing of the
 * transaction was committed: the work may be retried as a whole, later.
 */
export function isTimeoutError(err: unknown): boolean {
  const code = pgCode(err);
  return code === '57014' || code === '55P03' || code === '25P03';
}

/**
 * The statement failed and certainly committed nothing, and trying it again later may succeed:
 * a deadlock or serialization failure, or a bound on waiting (isTimeoutError). A caller that
 * gave the work back on such an error loses nothing, and may delete what only that statement
 * would have named (a connection error, by contrast, may come after the commit).
 */
export function isRolledBackError(err: unknown): boolean {
  return isRetryableTransactionError(err) || isTimeoutError(err);
}

/**
 * The database answers but not in time: the pool's acquire timeout, too many connections
 * (53300), a cancelled or timed-out statement (57014).
 */
export function isOverloadError(err: unknown): boolean {
  if ((err as { name?: unknown } | null)?.name === 'KnexTimeoutError') return true;
  const code = pgCode(err);
  return code === '53300' || isTimeoutError(err);
}
