/**
 * The relay's periodic ledger audit: one pass checks what was written since the previous pass
 * (migration 20261126000040 explains the cursor), so its cost follows the write rate, never the
 * size of history. It proves the same invariants as the full audit (ledger-audit-full.ts):
 *
 * - every journal transaction written since the cursor sums to zero;
 * - every execution written or moved since the cursor (its row stamped by the trigger, or named
 *   by a new journal entry) is reserved once, settled at most once (once when ended), for its
 *   charge, within its reservation, and exists;
 * - every project, every pass: no negative balance, its balance row equals its journal, credits
 *   = available + reserved + charged, reserved = its open executions' reservations. Its journal
 *   is ledger_audit_totals (the sums of every row the cursor has passed) plus the visible rows
 *   past the cursor (the rows since this pass's horizon: a few seconds of writes), its open
 *   reservations are read through executions_project_status_idx: the cost is the number of
 *   projects and of open executions, not of history.
 *
 * A finding is sticky: the ids that failed are kept in ledger_audit_state and checked again
 * every pass until they hold, so a broken invariant keeps the verdict at "broken" as the full
 * audit would, though the cursor has moved on.
 *
 * What only the full audit sees: history rewritten behind the cursor (journal rows deleted or
 * updated despite the append-only trigger, rows inserted with a forged audit_xid, an execution
 * changed with triggers off, i.e. session_replication_role = replica, without its money moving).
 *
 * Several relays: a pass takes a transaction-level advisory lock; a relay that does not get it
 * reports the verdict of the last pass (ledger_audit_state). The state row is also updated under
 * REPEATABLE READ, so a pass whose snapshot predates another's commit fails to serialize rather
 * than run the same window twice.
 */
import type { Knex } from 'knex';
import {
  executionProblems,
  failingExecutions,
  MAX_LISTED_PROBLEMS,
  OPEN,
  OPEN_RESERVED_LATERAL,
  ProblemList,
  projectProblems,
  transactionProblem,
  unbalancedTransactions,
  type AuditProblem,
  type ProjectFacts,
} from './ledger-audit-checks';
import { isRetryableTransactionError } from './pg-errors';

export interface PassOptions {
  /** Rows per statement. */
  batch?: number;
  /** A pass stops after this many journal rows (and as many executions) and reports itself behind. */
  maxRows?: number;
}

export interface PassReport {
  /** false: another process was auditing; the verdict below is the last completed pass's. */
  ran: boolean;
  /** true: every invariant held; false: one is broken; null: no verdict (behind: the next pass goes on). */
  ok: boolean | null;
  /** The cursor reached the horizon (not behind). */
  caughtUp: boolean;
  ledgerEntries: number;
  checkedExecutions: number;
  checkedProjects: number;
  problems: AuditProblem[];
  problemCount: number;
}

const LOCK = "hashtext('tes.ledger_audit')";

/**
 * The pass's horizon: the oldest transaction of this snapshot that may still write to this
 * database (or, if none, the snapshot's xmax). Every transaction below it has ended, and any
 * that commits later has, or will get, an id at or above it (see the migration), so the cursor
 * may pass every row below it. A running transaction is skipped only when it is known to belong
 * to another database (sessions are bound to one database), so a long transaction elsewhere on
 * the cluster does not hold the audit back. Which transactions those are is read BEFORE the
 * snapshot (FOREIGN_XIDS_SQL): one that began since then is not skipped (safe: it is newer than
 * every row already committed), and one that cannot be placed (pg_stat_activity hides other
 * roles' sessions from a role without pg_read_all_stats) is taken to be ours, which is safe too,
 * only slower.
 */
const HORIZON_SQL = `SELECT coalesce(
      (SELECT min(x) FROM pg_snapshot_xip(pg_current_snapshot()) AS x
        WHERE NOT (x::text::bigint % 4294967296) = ANY(:foreign::bigint[])),
      pg_snapshot_xmax(pg_current_snapshot()))`;

const FOREIGN_XIDS_SQL = `SELECT coalesce(array_agg(x), '{}') AS xids FROM (
    SELECT backend_xid::text::bigint AS x FROM pg_stat_activity WHERE datname <> current_database() AND backend_xid IS NOT NULL
    UNION ALL
    SELECT transaction::text::bigint FROM pg_prepared_xacts WHERE database <> current_database()
  ) s`;

interface State {
  ledger_xid: string;
  ledger_id: number;
  execution_xid: string;
  execution_id: string;
  open_transactions: string[];
  open_executions: string[];
}

/** One incremental pass. Safe to run from several processes at once. */
export async function auditLedgerPass(db: Knex, options: PassOptions = {}): Promise<PassReport> {
  const batch = options.batch ?? 5_000;
  const maxRows = options.maxRows ?? 200_000;
  try {
    const foreign = (await db.raw<{ rows: { xids: number[] }[] }>(FOREIGN_XIDS_SQL)).rows[0]?.xids ?? [];
    const report = await db.transaction(async (trx) => {
      await trx.raw('SET TRANSACTION ISOLATION LEVEL REPEATABLE READ');
      // the statements are small, but a bloated ledger_audit_totals (dead versions between two
      // vacuums) inflates their estimates past jit_above_cost: compiling them cost more (20-60 ms)
      // than running them
      await trx.raw('SET LOCAL jit = off');
      const head = await trx.raw<{ rows: { locked: boolean; horizon: string }[] }>(
        `SELECT pg_try_advisory_xact_lock(${LOCK}) AS locked, (${HORIZON_SQL})::text AS horizon`,
        { foreign },
      );
      const { locked, horizon } = head.rows[0]!;
      if (!locked) return null;
      const state = (
        await trx.raw<{ rows: State[] }>(
          `SELECT ledger_xid::text, ledger_id, execution_xid::text, execution_id, open_transactions, open_executions
             FROM ledger_audit_state WHERE id = 1 FOR UPDATE`,
        )
      ).rows[0];
      if (!state) throw new Error('ledger_audit_state is missing (migration 20261126000040 not applied)');
      return runPass(trx, state, horizon, batch, maxRows);
    });
    return report ?? (await lastVerdict(db));
  } catch (err) {
    // another pass committed after this one's snapshot was taken: it audited this window
    if (isRetryableTransactionError(err)) return lastVerdict(db);
    throw err;
  }
}

async function runPass(trx: Knex.Transaction, state: State, horizon: string, batch: number, maxRows: number): Promise<PassReport> {
  const problems = new ProblemList();
  const failingTx = new Map<string, AuditProblem>();
  const failingEx = new Map<string, AuditProblem[]>();
  const checkTransactions = async (ids: string[]) => {
    for (const t of await unbalancedTransactions(trx, ids)) failingTx.set(t.transaction_id, transactionProblem(t));
  };
  const checkExecutions = async (ids: string[]) => {
    for (const f of await failingExecutions(trx, ids)) failingEx.set(f.journal_id, executionProblems(f));
  };

  // 1. Journal rows past the cursor and below the horizon, in (audit_xid, id) order. Each batch
  //    adds its sums to this pass's own table (dropped at commit); they reach ledger_audit_totals
  //    once, after the last batch. Adding each batch to ledger_audit_totals wrote a new version of
  //    every row a batch touched, all of them still visible to this transaction so none could be
  //    pruned: a catch-up over 10 M executions left it 3.9 GB for 46,000 rows, and every pass
  //    after read that whole table to sum it per project (step 4).
  await trx.raw(
    `CREATE TEMP TABLE tes_audit_pass_sums (project_id text, account text, amount_micros bigint NOT NULL, PRIMARY KEY (project_id, account)) ON COMMIT DROP`,
  );
  let ledger = { xid: state.ledger_xid, id: state.ledger_id };
  let ledgerEntries = 0;
  let ledgerDone = false;
  while (ledgerEntries < maxRows) {
    const r = (
      await trx.raw<{ rows: { last_xid: string | null; last_id: number | null; n: number; suspects: string[]; executions: string[] }[] }>(
        `WITH b AS (
           SELECT audit_xid, id, transaction_id, project_id, execution_id, account, amount_micros FROM ledger_entries
            WHERE audit_xid IS NOT NULL AND (audit_xid, id) > (:xid::xid8, :id::bigint) AND audit_xid < :horizon::xid8
            ORDER BY audit_xid, id LIMIT :n
         ), t AS (
           INSERT INTO tes_audit_pass_sums (project_id, account, amount_micros)
           SELECT project_id, account, sum(amount_micros) FROM b GROUP BY project_id, account
           ON CONFLICT (project_id, account) DO UPDATE SET amount_micros = tes_audit_pass_sums.amount_micros + excluded.amount_micros
           RETURNING 1
         ), last AS (SELECT audit_xid, id FROM b ORDER BY audit_xid DESC, id DESC LIMIT 1)
         SELECT (SELECT audit_xid::text FROM last) AS last_xid, (SELECT id FROM last) AS last_id, (SELECT count(*) FROM b)::int AS n,
           (SELECT count(*) FROM t) AS upserts,
           (SELECT coalesce(json_agg(s.transaction_id), '[]') FROM
              (SELECT transaction_id FROM b GROUP BY transaction_id HAVING sum(amount_micros) <> 0) s) AS suspects,
           -- executions whose journal moved without their row being stamped past the executions
           -- cursor (the executions loop below checks those that were): normally none
           -- (the stamp read by primary key, once per execution: a row comparison in a join lets
           -- the planner range over executions_audit_idx per row instead)
           (SELECT coalesce(json_agg(x.execution_id), '[]') FROM (
              SELECT d.execution_id, (SELECT e.audit_xid FROM executions e WHERE e.id = d.execution_id) AS stamp
                FROM (SELECT DISTINCT execution_id FROM b WHERE execution_id IS NOT NULL) d
            ) x WHERE x.stamp IS NULL OR (x.stamp, x.execution_id) <= (:exXid::xid8, :exId::text)) AS executions`,
        { xid: ledger.xid, id: ledger.id, horizon, n: batch, exXid: state.execution_xid, exId: state.execution_id },
      )
    ).rows[0]!;
    if (r.n > 0 && r.last_xid !== null && r.last_id !== null) {
      await checkTransactions(r.suspects);
      await checkExecutions(r.executions);
      ledger = { xid: r.last_xid, id: r.last_id };
      ledgerEntries += r.n;
    }
    if (r.n < batch) {
      ledgerDone = true;
      break;
    }
  }
  // one new version per touched row per pass (the cursor it matches is written in this transaction too)
  await trx.raw(
    `INSERT INTO ledger_audit_totals (project_id, account, amount_micros)
     SELECT project_id, account, amount_micros FROM tes_audit_pass_sums
     ON CONFLICT (project_id, account) DO UPDATE SET amount_micros = ledger_audit_totals.amount_micros + excluded.amount_micros`,
  );

  // 2. Executions inserted or moved (status, reservation, charge, project) past the cursor.
  let execution = { xid: state.execution_xid, id: state.execution_id };
  let checkedExecutions = 0;
  let executionsDone = false;
  while (checkedExecutions < maxRows) {
    const rows = (
      await trx.raw<{ rows: { xid: string; id: string }[] }>(
        `SELECT audit_xid::text AS xid, id FROM executions
          WHERE audit_xid IS NOT NULL AND (audit_xid, id) > (:xid::xid8, :id::text) AND audit_xid < :horizon::xid8
          ORDER BY audit_xid, id LIMIT :n`,
        { xid: execution.xid, id: execution.id, horizon, n: batch },
      )
    ).rows;
    await checkExecutions(rows.map((e) => e.id));
    checkedExecutions += rows.length;
    const last = rows[rows.length - 1];
    if (last) execution = { xid: last.xid, id: last.id };
    if (rows.length < batch) {
      executionsDone = true;
      break;
    }
  }

  // 3. The findings still open from earlier passes, checked again (bounded: at most
  //    MAX_LISTED_PROBLEMS of each kind are kept).
  await checkTransactions(state.open_transactions.filter((id) => !failingTx.has(id)));
  await checkExecutions(state.open_executions.filter((id) => !failingEx.has(id)));
  for (const p of failingTx.values()) problems.add(p);
  for (const ps of failingEx.values()) problems.add(...ps);

  // 4. Every project, from the maintained totals, once the cursor is at the horizon (behind, the
  //    rows past the cursor are not few, and the next pass goes on from here).
  const caughtUp = ledgerDone && executionsDone;
  let checkedProjects = 0;
  if (caughtUp) {
    const projects = await trx.raw<{ rows: ProjectFacts[] }>(
      `SELECT f.* FROM (
         SELECT p.id, p.available_micros, p.reserved_micros,
                (coalesce(t.funding, 0) + coalesce(r.funding, 0))::bigint AS j_funding,
                (coalesce(t.available, 0) + coalesce(r.available, 0))::bigint AS j_available,
                (coalesce(t.reserved, 0) + coalesce(r.reserved, 0))::bigint AS j_reserved,
                (coalesce(t.charged, 0) + coalesce(r.charged, 0))::bigint AS j_charged,
                coalesce(o.open_reserved, 0)::bigint AS open_reserved
           FROM projects p
           LEFT JOIN (${SUMS_BY_PROJECT('ledger_audit_totals', 'true')}) t ON t.project_id = p.id
           LEFT JOIN (${SUMS_BY_PROJECT('ledger_entries', 'audit_xid IS NOT NULL AND (audit_xid, id) > (:xid::xid8, :id::bigint)')}) r ON r.project_id = p.id
           ${OPEN_RESERVED_LATERAL}
       ) f
       WHERE f.available_micros < 0 OR f.reserved_micros < 0 OR f.j_available <> f.available_micros OR f.j_reserved <> f.reserved_micros
          OR -f.j_funding <> f.available_micros + f.reserved_micros + f.j_charged OR f.open_reserved <> f.reserved_micros`,
      { xid: ledger.xid, id: ledger.id, open: [...OPEN] },
    );
    for (const p of projects.rows) problems.add(...projectProblems(p));
    checkedProjects = (await trx.raw<{ rows: { n: number }[] }>('SELECT count(*)::int AS n FROM projects')).rows[0]!.n;
  }

  const ok = problems.count > 0 ? false : caughtUp ? true : null;
  await trx.raw(
    `UPDATE ledger_audit_state
        SET ledger_xid = :lx::xid8, ledger_id = :li, execution_xid = :ex::xid8, execution_id = :ei,
            open_transactions = :ot::text[], open_executions = :oe::text[], ok = :ok, problems = :problems::jsonb, checked_at = now()
      WHERE id = 1`,
    {
      lx: ledger.xid,
      li: ledger.id,
      ex: execution.xid,
      ei: execution.id,
      ot: [...failingTx.keys()].slice(0, MAX_LISTED_PROBLEMS),
      oe: [...failingEx.keys()].slice(0, MAX_LISTED_PROBLEMS),
      ok,
      problems: JSON.stringify(problems.listed.slice(0, 20)),
    },
  );
  return { ran: true, ok, caughtUp, ledgerEntries, checkedExecutions, checkedProjects, problems: problems.listed, problemCount: problems.count };
}

/** Journal sums per project and account of `table` (ledger_entries or ledger_audit_totals) where `where`. */
function SUMS_BY_PROJECT(table: string, where: string): string {
  return `SELECT project_id,
      sum(amount_micros) FILTER (WHERE account = 'funding') AS funding,
      sum(amount_micros) FILTER (WHERE account = 'available') AS available,
      sum(amount_micros) FILTER (WHERE account = 'reserved') AS reserved,
      sum(amount_micros) FILTER (WHERE account = 'charged') AS charged
    FROM ${table} WHERE ${where} GROUP BY project_id`;
}

/** The verdict of the last completed pass (another process's), as the state row holds it. */
async function lastVerdict(db: Knex): Promise<PassReport> {
  const row = (await db.raw<{ rows: { ok: boolean | null; problems: AuditProblem[] }[] }>('SELECT ok, problems FROM ledger_audit_state WHERE id = 1')).rows[0];
  const problems = row?.problems ?? [];
  return {
    ran: false,
    ok: row?.ok ?? null,
    caughtUp: false,
    ledgerEntries: 0,
    checkedExecutions: 0,
    checkedProjects: 0,
    problems,
    problemCount: problems.length,
  };
}
