import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import { OPEN_STATUSES } from '@tes/core';

export type LedgerAccount = 'funding' | 'available' | 'reserved' | 'charged';
export type LedgerKind = 'credit' | 'reserve' | 'settle' | 'resolve';

export interface Posting {
  account: LedgerAccount;
  amountMicros: number;
}

export interface JournalEntry {
  projectId: string;
  executionId?: string | null;
  kind: LedgerKind;
  reference?: string | null;
  postings: Posting[];
}

/** Rows for one balanced journal transaction; throws if the postings do not sum to zero. */
function journalRows(entry: JournalEntry): Record<string, unknown>[] {
  let sum = 0;
  for (const p of entry.postings) {
    if (!Number.isSafeInteger(p.amountMicros)) throw new Error(`posting is not an integer: ${p.amountMicros}`);
    sum += p.amountMicros;
  }
  if (sum !== 0) throw new Error(`unbalanced journal entry (sum ${sum})`);
  const transactionId = randomUUID();
  // Zero postings are kept: every movement, even of nothing, leaves its trace for the audit.
  return entry.postings.map((p) => ({
    transaction_id: transactionId,
    project_id: entry.projectId,
    execution_id: entry.executionId ?? null,
    kind: entry.kind,
    account: p.account,
    amount_micros: p.amountMicros,
    reference: entry.reference ?? null,
  }));
}

export async function postJournal(trx: Knex.Transaction | Knex, entry: JournalEntry): Promise<void> {
  const rows = journalRows(entry);
  if (rows.length > 0) await trx('ledger_entries').insert(rows);
}

export interface AuditProblem {
  check: string;
  projectId?: string;
  executionId?: string;
  detail: string;
}

export interface AuditReport {
  ok: boolean;
  checkedProjects: number;
  checkedExecutions: number;
  ledgerEntries: number;
  totals: { creditedMicros: number; availableMicros: number; reservedMicros: number; chargedMicros: number };
  problems: AuditProblem[];
}

/**
 * Proves the money invariants from the database alone:
 *  1. every journal transaction sums to zero (so all postings do);
 *  2. per project, the journal's available and reserved accounts equal the balance row;
 *  3. per project, credits = available + reserved + charged (nothing created or lost);
 *  4. per project, reserved equals the sum of reservations of unsettled executions;
 *  5. each settled execution has exactly one settlement whose charge equals charged_micros
 *     and never exceeds its reservation; unsettled ones have none; every execution was
 *     reserved exactly once;
 *  6. no balance is negative.
 */
export async function auditLedger(db: Knex): Promise<AuditReport> {
  const problems: AuditProblem[] = [];
  const open = OPEN_STATUSES as readonly string[];

  const unbalanced = await db.raw<{ rows: { transaction_id: string; sum: number }[] }>(`
    SELECT transaction_id, sum(amount_micros)::bigint AS sum FROM ledger_entries
    GROUP BY transaction_id HAVING sum(amount_micros) <> 0 LIMIT 100`);
  for (const r of unbalanced.rows) {
    problems.push({ check: 'transaction_balanced', detail: `transaction ${r.transaction_id} sums to ${r.sum}` });
  }

  const projects = await db.raw<{
    rows: {
      id: string;
      available_micros: number;
      reserved_micros: number;
      j_funding: number;
      j_available: number;
      j_reserved: number;
      j_charged: number;
      open_reserved: number;
    }[];
  }>(
    `
    SELECT p.id, p.available_micros, p.reserved_micros,
      coalesce(j.funding, 0)::bigint AS j_funding, coalesce(j.available, 0)::bigint AS j_available,
      coalesce(j.reserved, 0)::bigint AS j_reserved, coalesce(j.charged, 0)::bigint AS j_charged,
      coalesce(e.open_reserved, 0)::bigint AS open_reserved
    FROM projects p
    LEFT JOIN (
      SELECT project_id,
        sum(amount_micros) FILTER (WHERE account = 'funding') AS funding,
        sum(amount_micros) FILTER (WHERE account = 'available') AS available,
        sum(amount_micros) FILTER (WHERE account = 'reserved') AS reserved,
        sum(amount_micros) FILTER (WHERE account = 'charged') AS charged
      FROM ledger_entries GROUP BY project_id
    ) j ON j.project_id = p.id
    LEFT JOIN (
      SELECT project_id, sum(reserved_micros) AS open_reserved FROM executions
      WHERE status = ANY(:open::text[]) GROUP BY project_id
    ) e ON e.project_id = p.id`,
    { open: [...open] },
  );
  const totals = { creditedMicros: 0, availableMicros: 0, reservedMicros: 0, chargedMicros: 0 };
  for (const p of projects.rows) {
    totals.creditedMicros += -p.j_funding;
    totals.availableMicros += p.available_micros;
    totals.reservedMicros += p.reserved_micros;
    totals.chargedMicros += p.j_charged;
    const bad = (check: string, detail: string) => problems.push({ check, projectId: p.id, detail });
    if (p.available_micros < 0 || p.reserved_micros < 0) bad('no_negative_balance', `available ${p.available_micros}, reserved ${p.reserved_micros}`);
    if (p.j_available !== p.available_micros) bad('available_matches_journal', `row ${p.available_micros} vs journal ${p.j_available}`);
    if (p.j_reserved !== p.reserved_micros) bad('reserved_matches_journal', `row ${p.reserved_micros} vs journal ${p.j_reserved}`);
    if (-p.j_funding !== p.available_micros + p.reserved_micros + p.j_charged) {
      bad('credits_conserved', `credits ${-p.j_funding} vs available+reserved+charged ${p.available_micros + p.reserved_micros + p.j_charged}`);
    }
    if (p.open_reserved !== p.reserved_micros) bad('reserved_matches_open_executions', `row ${p.reserved_micros} vs open executions ${p.open_reserved}`);
  }

  const executions = await db.raw<{
    rows: {
      id: string;
      project_id: string;
      status: string;
      reserved_micros: number;
      charged_micros: number;
      reserves: number;
      reserve_amount: number;
      settlements: number;
      settled_charge: number;
    }[];
  }>(
    `
    SELECT e.id, e.project_id, e.status, e.reserved_micros, e.charged_micros,
      coalesce(l.reserves, 0)::int AS reserves, coalesce(l.reserve_amount, 0)::bigint AS reserve_amount,
      coalesce(l.settlements, 0)::int AS settlements, coalesce(l.settled_charge, 0)::bigint AS settled_charge
    FROM executions e
    LEFT JOIN (
      SELECT execution_id,
        count(DISTINCT transaction_id) FILTER (WHERE kind = 'reserve') AS reserves,
        sum(amount_micros) FILTER (WHERE kind = 'reserve' AND account = 'reserved') AS reserve_amount,
        count(DISTINCT transaction_id) FILTER (WHERE kind IN ('settle', 'resolve')) AS settlements,
        sum(amount_micros) FILTER (WHERE kind IN ('settle', 'resolve') AND account = 'charged') AS settled_charge
      FROM ledger_entries WHERE execution_id IS NOT NULL GROUP BY execution_id
    ) l ON l.execution_id = e.id`,
  );
  for (const e of executions.rows) {
    const bad = (check: string, detail: string) => problems.push({ check, projectId: e.project_id, executionId: e.id, detail });
    const isOpen = open.includes(e.status);
    if (e.reserves !== 1 || e.reserve_amount !== e.reserved_micros)
      bad('reserved_once', `${e.reserves} reservations of ${e.reserve_amount} for ${e.reserved_micros}`);
    if (isOpen && e.settlements !== 0) bad('open_not_settled', `${e.status} execution has ${e.settlements} settlements`);
    if (!isOpen && e.settlements !== 1) bad('settled_once', `${e.status} execution has ${e.settlements} settlements`);
    if (!isOpen && e.settled_charge !== e.charged_micros) bad('charge_matches_journal', `charged ${e.charged_micros} vs journal ${e.settled_charge}`);
    if (e.charged_micros > e.reserved_micros) bad('charge_within_reservation', `charged ${e.charged_micros} > reserved ${e.reserved_micros}`);
  }

  const count = await db.raw<{ rows: { n: number }[] }>('SELECT count(*)::bigint AS n FROM ledger_entries');
  return {
    ok: problems.length === 0,
    checkedProjects: projects.rows.length,
    checkedExecutions: executions.rows.length,
    ledgerEntries: count.rows[0]?.n ?? 0,
    totals,
    problems,
  };
}
