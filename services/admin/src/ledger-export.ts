/**
 * `ledger export`: one project's journal entries of one UTC month, as CSV or JSON lines, for a
 * finance team to reconcile against (every posting, its transaction, the execution and tool it
 * belongs to, the amount in micros and dollars, and the account's balance after it).
 */
import { stringify } from 'csv-stringify/sync';
import type { Knex } from 'knex';
import { journalEntriesPage, openingBalances } from '@tes/db';
import { usd } from './format';

export type ExportFormat = 'csv' | 'jsonl';

/** Rows fetched per statement: the export streams, so a month of millions of entries fits. */
const BATCH = 5_000;

export interface ExportLine {
  entryId: number;
  transactionId: string;
  createdAt: string;
  projectId: string;
  executionId: string | null;
  tool: string | null;
  model: string | null;
  kind: string;
  account: string;
  amountMicros: number;
  amountUsd: string;
  balanceAfterMicros: number;
  balanceAfterUsd: string;
  reference: string | null;
}

/** The CSV header: the ExportLine fields, in order, in snake_case. */
const CSV_COLUMNS: [keyof ExportLine, string][] = [
  ['entryId', 'entry_id'],
  ['transactionId', 'transaction_id'],
  ['createdAt', 'created_at'],
  ['projectId', 'project_id'],
  ['executionId', 'execution_id'],
  ['tool', 'tool'],
  ['model', 'model'],
  ['kind', 'kind'],
  ['account', 'account'],
  ['amountMicros', 'amount_micros'],
  ['amountUsd', 'amount_usd'],
  ['balanceAfterMicros', 'balance_after_micros'],
  ['balanceAfterUsd', 'balance_after_usd'],
  ['reference', 'reference'],
];

/** "2026-11" -> the UTC month [start, end). */
export function parseMonth(value: string): { start: Date; end: Date } | null {
  const m = /^(\d{4})-(0[1-9]|1[0-2])$/.exec(value);
  if (!m) return null;
  const year = Number(m[1]);
  const month = Number(m[2]);
  return { start: new Date(Date.UTC(year, month - 1, 1)), end: new Date(Date.UTC(year, month, 1)) };
}

function csv(lines: ExportLine[], header: boolean): string {
  // csv-stringify quotes a field holding a comma, a quote or a line break (RFC 4180) and writes
  // null as an empty field. Values are not rewritten (no formula escaping): the references come
  // from operators, and a finance export must carry them exactly.
  return stringify(
    lines.map((l) => CSV_COLUMNS.map(([k]) => l[k])),
    header ? { header: true, columns: CSV_COLUMNS.map(([, h]) => h) } : {},
  ).replace(/\n$/, '');
}

/**
 * The month's entries in journal order (time, then entry id: the postings of one transaction
 * share its time and sit together). The balance after each entry is its account's running total
 * from the project's first entry, so the first line of a month continues the last of the month
 * before. Read in one repeatable-read snapshot, so the batches and the opening balances agree
 * even while new entries are written. ledger_project_time_idx serves both statements: the
 * opening balances as an index-only scan, each batch as an index range.
 */
export async function* exportLedger(
  db: Knex,
  input: { projectId: string; month: { start: Date; end: Date }; format: ExportFormat; batchSize?: number },
): AsyncGenerator<string> {
  const batch = input.batchSize ?? BATCH;
  const trx = await db.transaction(undefined, { isolationLevel: 'repeatable read', readOnly: true });
  try {
    const balance = await openingBalances(trx, input.projectId, input.month.start);
    if (input.format === 'csv') yield csv([], true);
    let after: { at: string; id: number } | null = null;
    for (;;) {
      const rows = await journalEntriesPage(trx, { projectId: input.projectId, start: input.month.start, end: input.month.end, after, limit: batch });
      if (rows.length === 0) break;
      const lines = rows.map((r): ExportLine => {
        const total = (balance.get(r.account) ?? 0) + r.amount_micros;
        balance.set(r.account, total);
        return {
          entryId: r.id,
          transactionId: r.transaction_id,
          createdAt: r.at,
          projectId: input.projectId,
          executionId: r.execution_id,
          tool: r.tool,
          model: r.model,
          kind: r.kind,
          account: r.account,
          amountMicros: r.amount_micros,
          amountUsd: usd(r.amount_micros),
          balanceAfterMicros: total,
          balanceAfterUsd: usd(total),
          reference: r.reference,
        };
      });
      yield input.format === 'csv' ? csv(lines, false) : lines.map((l) => JSON.stringify(l)).join('\n');
      const last = rows[rows.length - 1]!;
      after = { at: last.at, id: last.id };
      if (rows.length < batch) break;
    }
    await trx.commit();
  } finally {
    if (!trx.isCompleted()) await trx.rollback();
  }
}
