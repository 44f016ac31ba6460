import { newId } from '@tes/core';
import type { Knex } from 'knex';

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
  const transactionId = newId('txn');
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

export type { AuditProblem, AuditTotals } from './ledger-audit-checks';
export { auditLedger, type AuditReport, type FullAuditOptions } from './ledger-audit-full';
export { auditLedgerPass, type PassOptions, type PassReport } from './ledger-audit-pass';
