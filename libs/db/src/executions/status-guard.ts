import type { ExecutionStatus } from '@tes/core';

/**
 * A by-id statement's guard on the execution's status, written so that the planner can only
 * reach the row through the primary key (issue #24).
 *
 * `id = :id AND status IN ('running', 'waiting')` also matches the partial indexes of the live
 * states (executions_lease_idx: queued, running, waiting; until migration 20261127000021 also
 * executions_queued_fair_idx: queued).
 * Their statistics are as old as the table's last ANALYZE, which autovacuum runs on a 10 M-row
 * table only after a million changed rows: analyzed while nothing was queued (a quiet night, a
 * restored history), they look empty, and the planner prefers them to the primary key. Behind
 * a backlog the statement then walks every queued row to find its one: 3,000 rows read per
 * call in tests/e2e/claim-backlog.test.ts, 3.2 s per fair claim behind 10,000 in the history
 * bench. Compared with an InitPlan, `status = ANY((SELECT ARRAY[...])::text[])`, the states are a value
 * no plan is made for, so no partial index is implied and only the primary key is left. The
 * guard keeps its meaning: it is checked on the row, and re-checked by a concurrent update's
 * re-evaluation (EvalPlanQual) like any other condition.
 *
 * Statements that mean to scan a live state (the reaper, the fair pick, the queue gauges) keep
 * their literals: those indexes are their plan.
 */
export function statusGuard(column: string, statuses: readonly ExecutionStatus[]): string {
  if (!/^[a-z_.]+$/.test(column)) throw new Error(`statusGuard: not a column: ${column}`);
  return `${column} = ANY((SELECT ARRAY[${statuses.map((s) => `'${s}'`).join(', ')}])::text[])`;
}

/** The same guard for states given as a bound array (`:from::text[]`). */
export function statusGuardBound(column: string, binding: string): string {
  if (!/^[a-z_.]+$/.test(column) || !/^:\w+$/.test(binding)) throw new Error(`statusGuardBound: ${column} ${binding}`);
  return `${column} = ANY((SELECT ${binding}::text[])::text[])`;
}
