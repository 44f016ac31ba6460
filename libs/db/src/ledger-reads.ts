/** The operator's reads of the journal (the admin CLI's). Reads only. */
import type { Knex } from 'knex';
import { iso } from './time';

/** The journal's total per account for a project (every posting ever made). */
export async function journalTotals(db: Knex, projectId: string): Promise<Record<'funding' | 'available' | 'reserved' | 'charged', number>> {
  // ledger_project_time_idx covers (project_id) with account and amount included: an index-only scan
  const res = await db.raw<{ rows: { account: string; total: number }[] }>(
    'SELECT account, sum(amount_micros)::bigint AS total FROM ledger_entries WHERE project_id = :projectId GROUP BY account',
    { projectId },
  );
  const totals = { funding: 0, available: 0, reserved: 0, charged: 0 };
  for (const r of res.rows) totals[r.account as keyof typeof totals] = r.total;
  return totals;
}

export interface JournalLine {
  entryId: number;
  transactionId: string;
  createdAt: string;
  kind: string;
  account: string;
  amountMicros: number;
  reference: string | null;
}

/** An execution's journal entries, in the order they were written (ledger_execution_idx). */
export async function executionJournal(db: Knex, executionId: string): Promise<JournalLine[]> {
  const rows = await db('ledger_entries')
    .select('id', 'transaction_id', 'created_at', 'kind', 'account', 'amount_micros', 'reference')
    .where({ execution_id: executionId })
    .orderBy('id');
  return rows.map((r: Record<string, unknown>) => ({
    entryId: r.id as number,
    transactionId: r.transaction_id as string,
    createdAt: iso(r.created_at as Date)!,
    kind: r.kind as string,
    account: r.account as string,
    amountMicros: r.amount_micros as number,
    reference: r.reference as string | null,
  }));
}

/** Each account's balance before `before`: the sum of the project's entries written earlier (ledger_project_time_idx, index-only). */
export async function openingBalances(db: Knex, projectId: string, before: Date): Promise<Map<string, number>> {
  const res = await db.raw<{ rows: { account: string; total: number }[] }>(
    `SELECT account, sum(amount_micros)::bigint AS total FROM ledger_entries
      WHERE project_id = :projectId AND created_at < :before GROUP BY account`,
    { projectId, before },
  );
  return new Map(res.rows.map((r) => [r.account, r.total]));
}

/** One journal entry with its execution's tool and model, as the ledger export writes it. */
export interface LedgerExportRow {
  id: number;
  transaction_id: string;
  /** UTC, microseconds kept (the keyset cursor needs every digit). */
  at: string;
  execution_id: string | null;
  tool: string | null;
  model: string | null;
  kind: string;
  account: string;
  amount_micros: number;
  reference: string | null;
}

/**
 * A project's entries in [start, end) in (created_at, id) order, `limit` at a time after the
 * keyset cursor `after` (an index range of ledger_project_time_idx).
 */
export async function journalEntriesPage(
  db: Knex,
  p: { projectId: string; start: Date; end: Date; after: { at: string; id: number } | null; limit: number },
): Promise<LedgerExportRow[]> {
  const { after } = p;
  const res = await db.raw<{ rows: LedgerExportRow[] }>(
    `SELECT l.id, l.transaction_id, to_char(l.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS at,
            l.execution_id, e.tool, e.model, l.kind, l.account, l.amount_micros, l.reference
       FROM ledger_entries l
       LEFT JOIN executions e ON e.id = l.execution_id
      WHERE l.project_id = :projectId AND l.created_at >= :start AND l.created_at < :end
        ${after ? 'AND (l.created_at, l.id) > (:afterAt::timestamptz, :afterId::bigint)' : ''}
      ORDER BY l.created_at, l.id
      LIMIT ${p.limit}`,
    { projectId: p.projectId, start: p.start, end: p.end, ...(after ? { afterAt: after.at, afterId: after.id } : {}) },
  );
  return res.rows;
}
