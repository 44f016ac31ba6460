/**
 * The full ledger audit (`admin ledger audit`, and the tests' afterAll): every invariant over the
 * whole history, streamed in keyset batches so its memory is constant in the size of history
 * (per batch only aggregates and failing rows come back; across batches it keeps one running sum
 * per project and account). Its time is linear in history; the relay runs the incremental pass
 * (ledger-audit-pass.ts) instead.
 */
import type { Knex } from 'knex';
import {
  EXECUTION_FAILS,
  EXECUTION_JOURNAL_AGGREGATES,
  executionProblems,
  failingExecutions,
  OPEN,
  OPEN_RESERVED_LATERAL,
  ProblemList,
  projectProblems,
  transactionProblem,
  unbalancedTransactions,
  type AuditProblem,
  type AuditTotals,
  type ExecutionFacts,
} from './ledger-audit-checks';

export interface AuditReport {
  ok: boolean;
  checkedProjects: number;
  checkedExecutions: number;
  ledgerEntries: number;
  totals: AuditTotals;
  /** The first MAX_LISTED_PROBLEMS problems; problemCount counts them all. */
  problems: AuditProblem[];
  problemCount: number;
}

export interface FullAuditOptions {
  /** Journal rows per batch (one statement each). */
  ledgerBatch?: number;
  /** Executions per batch. */
  executionBatch?: number;
  /** Told about progress now and then (the admin CLI writes it to stderr). */
  progress?: (text: string) => void;
}

interface Sums {
  funding: number;
  available: number;
  reserved: number;
  charged: number;
}

/**
 * Proves the money invariants from the database alone, in one REPEATABLE READ snapshot (the
 * balance rows, the journal and the executions are read as of one instant):
 *  1. every journal transaction sums to zero (so all postings do);
 *  2. per project, the journal's available and reserved accounts equal the balance row;
 *  3. per project, credits = available + reserved + charged (nothing created or lost);
 *  4. per project, reserved equals the sum of reservations of its open executions;
 *  5. each ended execution has exactly one settlement whose charge equals charged_micros and
 *     never exceeds its reservation; open ones have none; every execution was reserved exactly
 *     once; every execution the journal names exists;
 *  6. no balance is negative.
 *
 * The snapshot is held for the whole run (a read-only transaction, so it holds back vacuum's
 * horizon for that long but takes no lock a writer waits for); each statement is one batch, so
 * a per-statement timeout need not be raised for it.
 */
export async function auditLedger(db: Knex, options: FullAuditOptions = {}): Promise<AuditReport> {
  const ledgerBatch = options.ledgerBatch ?? 50_000;
  const executionBatch = options.executionBatch ?? 20_000;
  const progress = throttled(options.progress);
  return db.transaction(async (trx) => {
    await trx.raw('SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY');
    const estimate = await trx.raw<{ rows: { ledger: number; executions: number }[] }>(
      `SELECT (SELECT greatest(reltuples, 0)::bigint FROM pg_class WHERE oid = 'ledger_entries'::regclass) AS ledger,
              (SELECT greatest(reltuples, 0)::bigint FROM pg_class WHERE oid = 'executions'::regclass) AS executions`,
    );
    const about = estimate.rows[0] ?? { ledger: 0, executions: 0 };
    const problems = new ProblemList();
    const sums = new Map<string, Sums>();

    // 1. The journal in id order: per-transaction sums (a transaction cut by a batch boundary
    //    looks unbalanced in both halves and is summed whole through its index), per-project sums.
    const reported = new Set<string>();
    let after = 0;
    let ledgerEntries = 0;
    for (;;) {
      const batch = await trx.raw<{ rows: { last_id: number | null; n: number; suspects: string[]; sums: [string, string, number][] }[] }>(
        `WITH b AS (SELECT id, transaction_id, project_id, account, amount_micros FROM ledger_entries WHERE id > :after ORDER BY id LIMIT :n)
         SELECT (SELECT max(id) FROM b) AS last_id, (SELECT count(*) FROM b)::int AS n,
           (SELECT coalesce(json_agg(s.transaction_id), '[]') FROM
              (SELECT transaction_id FROM b GROUP BY transaction_id HAVING sum(amount_micros) <> 0) s) AS suspects,
           (SELECT coalesce(json_agg(json_build_array(s.project_id, s.account, s.total)), '[]') FROM
              (SELECT project_id, account, sum(amount_micros)::bigint AS total FROM b GROUP BY project_id, account) s) AS sums`,
        { after, n: ledgerBatch },
      );
      const r = batch.rows[0]!;
      if (r.n === 0 || r.last_id === null) break;
      for (const [projectId, account, total] of r.sums) {
        const s = sums.get(projectId) ?? { funding: 0, available: 0, reserved: 0, charged: 0 };
        s[account as keyof Sums] += total;
        sums.set(projectId, s);
      }
      for (const t of await unbalancedTransactions(trx, r.suspects)) {
        if (reported.has(t.transaction_id)) continue;
        if (reported.size < 10_000) reported.add(t.transaction_id);
        problems.add(transactionProblem(t));
      }
      ledgerEntries += r.n;
      after = r.last_id;
      progress(`journal: ${ledgerEntries} of about ${Math.max(about.ledger, ledgerEntries)} entries`);
      if (r.n < ledgerBatch) break;
    }

    // 2. Executions in id order, each beside its journal: both read by one range of ids, the
    //    executions through their primary key and the journal through ledger_execution_idx.
    let from = '';
    let checkedExecutions = 0;
    for (;;) {
      const bound = await trx.raw<{ rows: { last: string | null; n: number }[] }>(
        `SELECT max(id) AS last, count(*)::int AS n FROM (SELECT id FROM executions WHERE id > :from ORDER BY id LIMIT :n) s`,
        { from, n: executionBatch },
      );
      const { last, n } = bound.rows[0]!;
      if (n === 0 || last === null) break;
      const failing = await trx.raw<{ rows: ExecutionFacts[] }>(
        `SELECT f.* FROM (
           SELECT coalesce(e.id, l.execution_id) AS journal_id, e.id, e.project_id, e.status,
                  coalesce(e.reserved_micros, 0)::bigint AS reserved_micros, coalesce(e.charged_micros, 0)::bigint AS charged_micros,
                  coalesce(l.reserves, 0)::int AS reserves, coalesce(l.reserve_amount, 0)::bigint AS reserve_amount,
                  coalesce(l.settlements, 0)::int AS settlements, coalesce(l.settled_charge, 0)::bigint AS settled_charge
             FROM (SELECT id, project_id, status, reserved_micros, charged_micros FROM executions WHERE id > :from AND id <= :last) e
             FULL JOIN (SELECT execution_id, ${EXECUTION_JOURNAL_AGGREGATES} FROM ledger_entries
                         WHERE execution_id > :from AND execution_id <= :last GROUP BY execution_id) l ON l.execution_id = e.id
         ) f WHERE ${EXECUTION_FAILS}`,
        { from, last, open: [...OPEN] },
      );
      for (const f of failing.rows) problems.add(...executionProblems(f));
      checkedExecutions += n;
      from = last;
      progress(`executions: ${checkedExecutions} of about ${Math.max(about.executions, checkedExecutions)}`);
      if (n < executionBatch) break;
    }
    // journal entries naming executions past the last one (none exist: each is a problem)
    const beyond = await trx.raw<{ rows: { execution_id: string }[] }>('SELECT DISTINCT execution_id FROM ledger_entries WHERE execution_id > :from LIMIT :n', {
      from,
      n: executionBatch,
    });
    for (const f of await failingExecutions(
      trx,
      beyond.rows.map((r) => r.execution_id),
    ))
      problems.add(...executionProblems(f));

    // 3. Projects: the balance rows beside the journal's sums and the open reservations.
    const totals: AuditTotals = { creditedMicros: 0, availableMicros: 0, reservedMicros: 0, chargedMicros: 0 };
    let projectFrom = '';
    let checkedProjects = 0;
    for (;;) {
      const rows = await trx.raw<{ rows: { id: string; available_micros: number; reserved_micros: number; open_reserved: number }[] }>(
        `SELECT p.id, p.available_micros, p.reserved_micros, coalesce(o.open_reserved, 0)::bigint AS open_reserved
           FROM projects p ${OPEN_RESERVED_LATERAL}
          WHERE p.id > :from ORDER BY p.id LIMIT :n`,
        { from: projectFrom, n: executionBatch, open: [...OPEN] },
      );
      for (const p of rows.rows) {
        const j = sums.get(p.id) ?? { funding: 0, available: 0, reserved: 0, charged: 0 };
        totals.creditedMicros += -j.funding;
        totals.availableMicros += p.available_micros;
        totals.reservedMicros += p.reserved_micros;
        totals.chargedMicros += j.charged;
        problems.add(...projectProblems({ ...p, j_funding: j.funding, j_available: j.available, j_reserved: j.reserved, j_charged: j.charged }));
      }
      checkedProjects += rows.rows.length;
      if (rows.rows.length < executionBatch) break;
      projectFrom = rows.rows[rows.rows.length - 1]!.id;
    }
    options.progress?.(`done: ${ledgerEntries} journal entries, ${checkedExecutions} executions, ${checkedProjects} projects, ${problems.count} problems`);
    return {
      ok: problems.count === 0,
      checkedProjects,
      checkedExecutions,
      ledgerEntries,
      totals,
      problems: problems.listed,
      problemCount: problems.count,
    };
  });
}

/** At most one progress line every two seconds. */
function throttled(progress: ((text: string) => void) | undefined): (text: string) => void {
  let last = 0;
  return (text) => {
    if (!progress) return;
    const now = Date.now();
    if (now - last < 2_000) return;
    last = now;
    progress(text);
  };
}
