/**
 * The money invariants, as checks the full and the incremental audit share (ledger-audit-full.ts,
 * ledger-audit-pass.ts): each is computed by the database per batch or per set of ids, and only
 * failing rows come back, so what the process holds is bounded by the batch, never by history.
 */
import type { Knex } from 'knex';
import { OPEN_STATUSES } from '@tes/core';

export interface AuditProblem {
  check: string;
  projectId?: string;
  executionId?: string;
  detail: string;
}

export interface AuditTotals {
  creditedMicros: number;
  availableMicros: number;
  reservedMicros: number;
  chargedMicros: number;
}

export const OPEN: readonly string[] = OPEN_STATUSES;

/** Problems kept in a report; past it they are counted, not listed (a report's memory is bounded). */
export const MAX_LISTED_PROBLEMS = 1_000;

/** One execution's row and its journal's aggregates (id null: the journal names an execution that does not exist). */
export interface ExecutionFacts {
  journal_id: string;
  id: string | null;
  project_id: string | null;
  status: string | null;
  reserved_micros: number;
  charged_micros: number;
  reserves: number;
  reserve_amount: number;
  settlements: number;
  settled_charge: number;
}

/** An execution's journal, aggregated over the rows of `source` (which names ledger_entries columns). */
export const EXECUTION_JOURNAL_AGGREGATES = `
  count(DISTINCT transaction_id) FILTER (WHERE kind = 'reserve') AS reserves,
  sum(amount_micros) FILTER (WHERE kind = 'reserve' AND account = 'reserved') AS reserve_amount,
  count(DISTINCT transaction_id) FILTER (WHERE kind IN ('settle', 'resolve')) AS settlements,
  sum(amount_micros) FILTER (WHERE kind IN ('settle', 'resolve') AND account = 'charged') AS settled_charge`;

/** True for the ExecutionFacts row `f` that executionProblems reports on (binding :open). */
export const EXECUTION_FAILS = `(f.id IS NULL OR f.reserves <> 1 OR f.reserve_amount <> f.reserved_micros
   OR f.charged_micros > f.reserved_micros
   OR (f.status = ANY(:open::text[]) AND f.settlements <> 0)
   OR (NOT f.status = ANY(:open::text[]) AND (f.settlements <> 1 OR f.settled_charge <> f.charged_micros)))`;

/**
 * Per execution: reserved exactly once, for its reservation; open ones not settled; ended ones
 * settled exactly once, for their charge; the charge never above the reservation. And every
 * execution the journal names exists.
 */
export function executionProblems(f: ExecutionFacts): AuditProblem[] {
  if (f.id === null || f.project_id === null || f.status === null) {
    return [{ check: 'journal_names_an_execution', executionId: f.journal_id, detail: 'journal entries name an execution that does not exist' }];
  }
  const out: AuditProblem[] = [];
  const bad = (check: string, detail: string) => out.push({ check, projectId: f.project_id!, executionId: f.id!, detail });
  const isOpen = OPEN.includes(f.status);
  if (f.reserves !== 1 || f.reserve_amount !== f.reserved_micros)
    bad('reserved_once', `${f.reserves} reservations of ${f.reserve_amount} for ${f.reserved_micros}`);
  if (isOpen && f.settlements !== 0) bad('open_not_settled', `${f.status} execution has ${f.settlements} settlements`);
  if (!isOpen && f.settlements !== 1) bad('settled_once', `${f.status} execution has ${f.settlements} settlements`);
  if (!isOpen && f.settled_charge !== f.charged_micros) bad('charge_matches_journal', `charged ${f.charged_micros} vs journal ${f.settled_charge}`);
  if (f.charged_micros > f.reserved_micros) bad('charge_within_reservation', `charged ${f.charged_micros} > reserved ${f.reserved_micros}`);
  return out;
}

/**
 * The executions of `ids` that break an invariant, each with its whole journal (read through
 * ledger_execution_idx: a few rows per execution). Cost: the number of ids, not history.
 */
export async function failingExecutions(db: Knex, ids: readonly string[]): Promise<ExecutionFacts[]> {
  if (ids.length === 0) return [];
  const res = await db.raw<{ rows: ExecutionFacts[] }>(
    `SELECT f.* FROM (
       SELECT i.id AS journal_id, e.id, e.project_id, e.status,
              coalesce(e.reserved_micros, 0)::bigint AS reserved_micros, coalesce(e.charged_micros, 0)::bigint AS charged_micros,
              coalesce(l.reserves, 0)::int AS reserves, coalesce(l.reserve_amount, 0)::bigint AS reserve_amount,
              coalesce(l.settlements, 0)::int AS settlements, coalesce(l.settled_charge, 0)::bigint AS settled_charge
         FROM unnest(:ids::text[]) AS i(id)
         -- LATERAL: one primary-key lookup per id, whatever the planner thinks of the table's size
         LEFT JOIN LATERAL (SELECT * FROM executions x WHERE x.id = i.id) e ON true
         CROSS JOIN LATERAL (SELECT ${EXECUTION_JOURNAL_AGGREGATES} FROM ledger_entries WHERE execution_id = i.id) l
     ) f WHERE ${EXECUTION_FAILS}`,
    { ids: [...ids], open: [...OPEN] },
  );
  return res.rows;
}

/** Of `ids`, the journal transactions whose postings (all of them, wherever they are) do not sum to zero. */
export async function unbalancedTransactions(db: Knex, ids: readonly string[]): Promise<{ transaction_id: string; sum: number }[]> {
  if (ids.length === 0) return [];
  const res = await db.raw<{ rows: { transaction_id: string; sum: number }[] }>(
    `SELECT transaction_id, sum(amount_micros)::bigint AS sum FROM ledger_entries
      WHERE transaction_id = ANY(:ids::text[]) GROUP BY transaction_id HAVING sum(amount_micros) <> 0`,
    { ids: [...ids] },
  );
  return res.rows;
}

export const transactionProblem = (r: { transaction_id: string; sum: number }): AuditProblem => ({
  check: 'transaction_balanced',
  detail: `transaction ${r.transaction_id} sums to ${r.sum}`,
});

/** A project's balance row beside its journal's sums per account and its open executions' reservations. */
export interface ProjectFacts {
  id: string;
  available_micros: number;
  reserved_micros: number;
  j_funding: number;
  j_available: number;
  j_reserved: number;
  j_charged: number;
  open_reserved: number;
}

/**
 * Per project: no negative balance; the balance row equals its journal (available, reserved);
 * credits = available + reserved + charged; reserved = the reservations of its open executions.
 */
export function projectProblems(p: ProjectFacts): AuditProblem[] {
  const out: AuditProblem[] = [];
  const bad = (check: string, detail: string) => out.push({ check, projectId: p.id, detail });
  if (p.available_micros < 0 || p.reserved_micros < 0) bad('no_negative_balance', `available ${p.available_micros}, reserved ${p.reserved_micros}`);
  if (p.j_available !== p.available_micros) bad('available_matches_journal', `row ${p.available_micros} vs journal ${p.j_available}`);
  if (p.j_reserved !== p.reserved_micros) bad('reserved_matches_journal', `row ${p.reserved_micros} vs journal ${p.j_reserved}`);
  if (-p.j_funding !== p.available_micros + p.reserved_micros + p.j_charged) {
    bad('credits_conserved', `credits ${-p.j_funding} vs available+reserved+charged ${p.available_micros + p.reserved_micros + p.j_charged}`);
  }
  if (p.open_reserved !== p.reserved_micros) bad('reserved_matches_open_executions', `row ${p.reserved_micros} vs open executions ${p.open_reserved}`);
  return out;
}

/**
 * A project's open reservations, for the LATERAL join of a query over `projects p` (binding
 * :open): read through executions_project_status_idx, so it costs the project's open
 * executions, never its history.
 */
export const OPEN_RESERVED_LATERAL = `LEFT JOIN LATERAL (
    SELECT sum(x.reserved_micros) AS open_reserved FROM executions x WHERE x.project_id = p.id AND x.status = ANY(:open::text[])
  ) o ON true`;

/** A report's problem list: the first MAX_LISTED_PROBLEMS kept, every one counted. */
export class ProblemList {
  readonly listed: AuditProblem[] = [];
  count = 0;
  add(...problems: AuditProblem[]): void {
    for (const p of problems) {
      this.count += 1;
      if (this.listed.length < MAX_LISTED_PROBLEMS) this.listed.push(p);
    }
  }
}
