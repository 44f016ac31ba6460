import type { Knex } from 'knex';
import { auditLedger } from '@tes/db';
import type { FaultClient, Submission } from './client';
import { sleep } from './cluster';

/**
 * What must hold after any fault, from the client's answers and the database alone:
 *  - no 500 was answered (a 503 is the documented "try again" and allowed where asked);
 *  - every submission was accepted once: every answer for a key names the same execution,
 *    and the database holds exactly one execution per key and none without a submission;
 *  - every execution ended (terminal, or needs_review where that is the designed outcome);
 *  - each terminal execution has exactly one settlement, a needs_review one none, and the
 *    charge is the cost of its succeeded steps (capped at the reservation): nothing charged
 *    twice for a rerun step;
 *  - per project: available + reserved = credits − charges, and reserved = what needs_review
 *    executions hold; and the ledger audit passes.
 */
export const TERMINAL = ['succeeded', 'failed', 'cancelled'];

export interface Expectations {
  allowNeedsReview?: boolean;
  /** HTTP statuses allowed at all (default: anything but 5xx). */
  allowedStatuses?: number[];
  /** Also allow 503 (an outage's documented answer). */
  allow503?: boolean;
  credits: Map<string, number>;
  /** Error codes no execution may end with (work lost to the fault rather than to its input). */
  forbidErrorCodes?: string[];
}

export interface Figures {
  submissions: number;
  accepted: number;
  byStatus: Record<string, number>;
  byErrorCode: Record<string, number>;
  settled: number;
  chargedMicros: number;
  resends: number;
}

const tally = (xs: string[]) => xs.reduce<Record<string, number>>((m, x) => ((m[x] = (m[x] ?? 0) + 1), m), {});

/** Polls the database until every accepted submission's execution has ended. */
export async function waitForEnd(db: Knex, subs: Submission[], allowNeedsReview: boolean, timeoutMs: number): Promise<number> {
  const done = allowNeedsReview ? [...TERMINAL, 'needs_review'] : TERMINAL;
  const ids = subs.map((s) => s.executionId).filter((x): x is string => !!x);
  const started = Date.now();
  for (;;) {
    const rows: { id: string; status: string }[] = await db('executions').select('id', 'status').whereIn('id', ids);
    const open = rows.filter((r) => !done.includes(r.status));
    if (rows.length === ids.length && open.length === 0) return Date.now() - started;
    if (Date.now() - started > timeoutMs) {
      throw new Error(`${open.length} executions still open after ${timeoutMs} ms: ${JSON.stringify(open.slice(0, 10))}`);
    }
    await sleep(100);
  }
}

export async function checkInvariants(db: Knex, client: FaultClient, subs: Submission[], x: Expectations): Promise<{ problems: string[]; figures: Figures }> {
  const problems: string[] = [...client.contractProblems];
  for (const [status, n] of client.statuses) {
    const allowed = x.allowedStatuses ? x.allowedStatuses.includes(status) : status < 500 || (x.allow503 === true && status === 503);
    if (!allowed) problems.push(`HTTP ${status} answered ${n} times`);
  }

  const projectIds = [...new Set(subs.map((s) => s.projectId))];
  const rows: {
    id: string;
    project_id: string;
    idempotency_key: string;
    status: string;
    reserved_micros: number;
    charged_micros: number;
    error_code: string | null;
  }[] = await db('executions')
    .select('id', 'project_id', 'idempotency_key', 'status', 'reserved_micros', 'charged_micros', 'error_code')
    .whereIn('project_id', projectIds);
  const byKey = new Map<string, typeof rows>();
  for (const r of rows) byKey.set(`${r.project_id}/${r.idempotency_key}`, [...(byKey.get(`${r.project_id}/${r.idempotency_key}`) ?? []), r]);
  const keys = new Set(subs.map((s) => `${s.projectId}/${s.key}`));
  for (const r of rows) if (!keys.has(`${r.project_id}/${r.idempotency_key}`)) problems.push(`execution ${r.id} has no submission (key ${r.idempotency_key})`);

  for (const s of subs) {
    const ids = new Set(s.attempts.map((a) => a.executionId).filter(Boolean));
    if (!s.executionId) problems.push(`key ${s.key} was never accepted: ${JSON.stringify(s.attempts.slice(-3))}`);
    if (ids.size > 1) problems.push(`key ${s.key} was answered with ${ids.size} different executions`);
    const found = byKey.get(`${s.projectId}/${s.key}`) ?? [];
    if (found.length !== 1) problems.push(`key ${s.key} has ${found.length} executions in the database`);
    else if (s.executionId && found[0]!.id !== s.executionId) problems.push(`key ${s.key}: answered ${s.executionId}, stored ${found[0]!.id}`);
  }

  const ids = rows.map((r) => r.id);
  const settlements: { execution_id: string; n: string | number }[] = await db('ledger_entries')
    .select('execution_id')
    .countDistinct({ n: 'transaction_id' })
    .whereIn('execution_id', ids)
    .andWhere({ kind: 'settle' })
    .groupBy('execution_id');
  const settledCount = new Map(settlements.map((r) => [r.execution_id, Number(r.n)]));
  const stepCosts: { execution_id: string; cost: string }[] = await db('execution_steps')
    .select('execution_id')
    .sum({ cost: 'cost_micros' })
    .whereIn('execution_id', ids)
    .andWhere({ status: 'succeeded' })
    .groupBy('execution_id');
  const costOf = new Map(stepCosts.map((r) => [r.execution_id, Number(r.cost)]));

  for (const r of rows) {
    const settled = settledCount.get(r.id) ?? 0;
    if (TERMINAL.includes(r.status)) {
      if (settled !== 1) problems.push(`${r.status} execution ${r.id} has ${settled} settlements`);
      const expected = Math.min(costOf.get(r.id) ?? 0, r.reserved_micros);
      if (r.status !== 'cancelled' && r.charged_micros !== expected)
        problems.push(`execution ${r.id} charged ${r.charged_micros}, its succeeded steps cost ${expected}`);
    } else if (r.status === 'needs_review' && x.allowNeedsReview) {
      if (settled !== 0 || r.charged_micros !== 0) problems.push(`needs_review execution ${r.id} was settled (${settled}, charged ${r.charged_micros})`);
    } else {
      problems.push(`execution ${r.id} ended ${r.status}`);
    }
    if (r.error_code && x.forbidErrorCodes?.includes(r.error_code)) problems.push(`execution ${r.id} ended ${r.status} with ${r.error_code}`);
  }

  for (const projectId of projectIds) {
    const p = await db('projects').select('available_micros', 'reserved_micros').where({ id: projectId }).first();
    const mine = rows.filter((r) => r.project_id === projectId);
    const charged = mine.reduce((sum, r) => sum + (TERMINAL.includes(r.status) ? r.charged_micros : 0), 0);
    const held = mine.filter((r) => r.status === 'needs_review').reduce((sum, r) => sum + r.reserved_micros, 0);
    const credit = x.credits.get(projectId) ?? 0;
    if (p.available_micros + p.reserved_micros !== credit - charged) {
      problems.push(`project ${projectId}: available ${p.available_micros} + reserved ${p.reserved_micros} ≠ credit ${credit} − charged ${charged}`);
    }
    if (p.reserved_micros !== held) problems.push(`project ${projectId}: reserved ${p.reserved_micros}, needs_review holds ${held}`);
  }

  const audit = await auditLedger(db);
  for (const p of audit.problems) problems.push(`audit ${p.check}: ${p.detail}`);

  return {
    problems,
    figures: {
      submissions: subs.length,
      accepted: subs.filter((s) => s.executionId).length,
      byStatus: tally(rows.map((r) => r.status)),
      byErrorCode: tally(rows.filter((r) => r.error_code).map((r) => r.error_code!)),
      settled: [...settledCount.values()].filter((n) => n > 0).length,
      chargedMicros: rows.reduce((sum, r) => sum + r.charged_micros, 0),
      resends: subs.reduce((sum, s) => sum + s.attempts.length - 1, 0),
    },
  };
}
