/** The processes that talk to Postgres, each with its own bounds on waiting there. */
export type DbRole = 'gateway' | 'worker' | 'relay' | 'admin';

/** The bounds in ms, each for one kind of wait (0: none). */
export interface DbTimeouts {
  statementTimeoutMs: number;
  lockTimeoutMs: number;
  idleInTransactionTimeoutMs: number;
}

/** Config.dbTimeouts: the configured bounds, null where the variable was unset (no import of Config: index.ts imports this file). */
interface ConfiguredDbTimeouts {
  readonly dbTimeouts: { readonly [K in keyof DbTimeouts]: number | null };
}

/**
 * Each role's defaults, in ms (0: none), for what DB_STATEMENT_TIMEOUT_MS, DB_LOCK_TIMEOUT_MS
 * and DB_IDLE_IN_TRANSACTION_TIMEOUT_MS leave unset:
 * - gateway: a request's statements are short; one stuck behind a lock or a slow plan is
 *   answered 503 service_unavailable (retryable) within seconds rather than holding a client
 *   and a pooled connection.
 * - worker: settlements and step records, short too, but a failed one costs an attempt: more room.
 * - relay: its sweeps are short, but the periodic ledger audit reads every journal row.
 * - admin: no statement timeout: `migrate` may rewrite or backfill a table and `ledger audit`
 *   / `ledger export` read everything, with an operator watching (Ctrl-C ends them). A lock
 *   timeout still: a migration queued behind a long transaction for an ACCESS EXCLUSIVE lock
 *   blocks every statement queued behind it, so it fails after 10 s instead (it is one
 *   transaction: run it again). No idle-in-transaction bound: `ledger export` reads one
 *   read-only snapshot in batches and waits on its reader (a pipe) between them.
 * The services: a transaction left idle (a process stuck between two statements, holding its
 *   locks) is ended by the server.
 */
const DB_TIMEOUT_DEFAULTS: Readonly<Record<DbRole, DbTimeouts>> = {
  gateway: { statementTimeoutMs: 10_000, lockTimeoutMs: 5_000, idleInTransactionTimeoutMs: 10_000 },
  worker: { statementTimeoutMs: 30_000, lockTimeoutMs: 10_000, idleInTransactionTimeoutMs: 30_000 },
  relay: { statementTimeoutMs: 300_000, lockTimeoutMs: 10_000, idleInTransactionTimeoutMs: 60_000 },
  admin: { statementTimeoutMs: 0, lockTimeoutMs: 10_000, idleInTransactionTimeoutMs: 0 },
};

/** The bounds a process of this role sets on its connections: the configured ones, else the role's defaults. */
export function dbTimeoutsFor(config: ConfiguredDbTimeouts, role: DbRole): DbTimeouts {
  const d = DB_TIMEOUT_DEFAULTS[role];
  const t = config.dbTimeouts;
  return {
    statementTimeoutMs: t.statementTimeoutMs ?? d.statementTimeoutMs,
    lockTimeoutMs: t.lockTimeoutMs ?? d.lockTimeoutMs,
    idleInTransactionTimeoutMs: t.idleInTransactionTimeoutMs ?? d.idleInTransactionTimeoutMs,
  };
}
