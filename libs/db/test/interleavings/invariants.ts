import { auditLedger } from '@tes/db';
import type { Outcome } from './scheduler';
import { bound, COST, CREDIT, KEY, type World } from './scenario';

/*
 * What must hold after any schedule of interleavings.test.ts, whatever the order: returned as
 * a list of violations (empty: the run is fine), so a failure names all of them at once.
 */

const OPEN = ['queued', 'running', 'waiting', 'needs_review'];
const TERMINAL = ['succeeded', 'failed', 'cancelled'];

interface ExecRow {
  id: string;
  status: string;
  reserved_micros: number;
  charged_micros: number;
  idempotency_key: string;
}

const describeError = (err: unknown) => {
  const e = err as { code?: unknown; message?: unknown };
  return `${typeof e.code === 'string' ? `${e.code} ` : ''}${typeof e.message === 'string' ? e.message.split('\n')[0] : String(err)}`;
};

export async function violations(w: World, outcomes: ReadonlyMap<string, Outcome>): Promise<string[]> {
  const out: string[] = [];
  const value = (name: string) => {
    const o = outcomes.get(name);
    return o?.ok === true ? o.value : undefined;
  };

  // No operation fails: a deadlock (40P01) or a serialization failure escaping from a submit, a
  // settlement or a pass of the relay is a failed request, a spent attempt or a stalled relay.
  for (const [name, o] of outcomes) if (o.ok === false) out.push(`${name} failed: ${describeError(o.error)}`);

  const execs = (
    await w.db.raw<{ rows: ExecRow[] }>('SELECT id, status, reserved_micros, charged_micros, idempotency_key FROM executions WHERE project_id = :projectId', {
      projectId: w.projectId,
    })
  ).rows;
  const byId = new Map(execs.map((e) => [e.id, e]));

  // The idempotency key is bound once, and the original and its resend answer with that one execution.
  const keyed = execs.filter((e) => e.idempotency_key === KEY);
  const answers = ['original', 'resend'].map((n) => value(n) as { kind: string; id?: string } | undefined).filter((v) => v !== undefined);
  if (answers.filter((a) => a.kind === 'created').length > 1) out.push(`two submits of one key both created: ${JSON.stringify(answers)}`);
  const ids = new Set(answers.flatMap((a) => (a.id ? [a.id] : [])));
  if (ids.size > 1 || (ids.size === 1 && keyed[0]?.id !== [...ids][0]))
    out.push(`the key is bound to ${keyed.map((e) => e.id).join(',') || 'nothing'}, the submits answered ${JSON.stringify(answers)}`);

  // Money: each reservation held once while its execution is open, released once when it ends,
  // a charge never above it; the balance row is the sum of its executions.
  const project = (
    await w.db.raw<{ rows: { available_micros: number; reserved_micros: number }[] }>(
      'SELECT available_micros, reserved_micros FROM projects WHERE id = :projectId',
      { projectId: w.projectId },
    )
  ).rows[0]!;
  const held = execs.filter((e) => OPEN.includes(e.status)).reduce((a, e) => a + e.reserved_micros, 0);
  const charged = execs.filter((e) => TERMINAL.includes(e.status)).reduce((a, e) => a + e.charged_micros, 0);
  if (project.reserved_micros !== held || project.available_micros !== CREDIT - held - charged)
    out.push(`balance ${JSON.stringify(project)}, expected reserved ${held} and available ${CREDIT - held - charged}`);
  for (const e of execs) if (e.charged_micros > e.reserved_micros) out.push(`${e.id} charged ${e.charged_micros} above its reservation`);
  const journal = (
    await w.db.raw<{ rows: { execution_id: string; kind: string; n: number }[] }>(
      `SELECT execution_id, kind, count(DISTINCT transaction_id)::int AS n FROM ledger_entries
        WHERE project_id = :projectId AND execution_id IS NOT NULL GROUP BY execution_id, kind`,
      { projectId: w.projectId },
    )
  ).rows;
  for (const e of execs) {
    const n = (kind: string) => journal.find((j) => j.execution_id === e.id && j.kind === kind)?.n ?? 0;
    if (n('reserve') !== 1) out.push(`${e.id} reserved ${n('reserve')} times`);
    const ends = n('settle') + n('resolve');
    if (ends !== (TERMINAL.includes(e.status) ? 1 : 0)) out.push(`${e.id} (${e.status}) settled ${ends} times`);
  }

  // A cancel answered "cancelled" (queued work) is final: nothing charged, no worker settled it.
  const cancelled = [
    ['cancel(bound)', bound(outcomes)],
    ['cancel(queued)', w.queued],
  ] as const;
  for (const [name, id] of cancelled) {
    if (value(name) !== 'cancelled' || !id) continue;
    const e = byId.get(id);
    if (e?.status !== 'cancelled' || e.charged_micros !== 0) out.push(`${name} answered cancelled, the execution is ${JSON.stringify(e)}`);
  }
  // A worker that settled its execution as succeeded charged its cost, once.
  const worked = [
    ['worker(bound)', bound(outcomes)],
    ['worker(running)', w.running],
    ['worker(queued)', w.queued],
    ['worker(expired)', w.expired],
    ['zombie(expired)', w.expired],
    ['reclaim(expired)', w.expired],
  ] as const;
  for (const [name, id] of worked) {
    if (value(name) !== 'settled succeeded' || !id) continue;
    const e = byId.get(id);
    if (e?.status !== 'succeeded' || e.charged_micros !== COST) out.push(`${name} settled, the execution is ${JSON.stringify(e)}`);
  }
  // A run whose execution was claimed by another run (of another worker, or of the same one
  // after the reaper re-dispatched it) writes nothing more: the stale run's settle is fenced out.
  const claimed = (name: string) => value(name) !== undefined && value(name) !== 'not claimed';
  for (const takeover of ['worker(expired)', 'reclaim(expired)'])
    if (claimed(takeover) && value('zombie(expired)') === 'settled succeeded')
      out.push(`${takeover} claimed the execution (${String(value(takeover))}), and the stale run it took over settled it`);

  // The janitor never deletes an upload that an execution which has not ended reads.
  for (const key of w.deletedInUse) out.push(`the janitor deleted ${key} while an open execution read it`);
  const reader = keyed[0];
  if (w.readsFile && reader && OPEN.includes(reader.status)) {
    const file = (await w.db.raw<{ rows: { deleted_at: Date | null }[] }>('SELECT deleted_at FROM files WHERE id = :id', { id: w.fileId })).rows[0];
    if (file?.deleted_at) out.push(`upload ${w.fileId} is deleted and the open execution ${reader.id} names it`);
  }

  const audit = await auditLedger(w.db);
  for (const p of audit.problems.filter((x) => x.projectId === undefined || x.projectId === w.projectId)) out.push(`ledger audit: ${JSON.stringify(p)}`);
  return out;
}
