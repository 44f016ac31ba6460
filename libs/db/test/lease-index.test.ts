import pg from 'pg';
import { categoryQueueStates, claimNextFair, MAX_ATTEMPTS, queuePlaces, reapExpiredLeases } from '@tes/db';
import { seedProject, submitTestExecution, useTestDatabase } from '@tes/testing';
import { scansOf, statementsDuring, withNestedPlans, type CapturedStatement, type ExplainRows } from '../../../tests/plans';

/**
 * executions_lease_idx is the reaper's (migration 20261127000010). At 10 M executions the planner
 * cannot see a line of a few hundred in its statistics, so both partial indexes of the live
 * states read as empty and it chose between them by size: a queued execution's place in line
 * then walked every project's live executions through this index, 500 buffers a poll. Which plan
 * the planner picks depends on sizes this test cannot grow, so it checks what it can decide:
 * whether the lease index can serve a statement at all. Each statement of the line's paths is
 * planned with every other index of executions set aside (invalid for the planner, in a
 * transaction rolled back) and sequential scans priced out: where the lease index applies, that
 * plan uses it. Only the reaper's may.
 */
const { db, database } = useTestDatabase({ poolMax: 2 });

/** The statements `run` sends that read executions, themselves or in a function they call (the fair claim's tes_claim_fair). */
async function statementsOf(run: () => Promise<unknown>): Promise<CapturedStatement[]> {
  return (await statementsDuring(database.name, run)).filter((s) => /\bexecutions\b|\btes_claim_fair\(/.test(s.text));
}

/**
 * Whether the plan of `s` reads executions through an index when executions_lease_idx is the only
 * one it may use (an index scan, or a bitmap of it): whether the lease index can serve it.
 */
async function reachesLeaseIndex(client: pg.Client, s: CapturedStatement): Promise<boolean> {
  await client.query('BEGIN');
  try {
    await client.query(`UPDATE pg_index SET indisvalid = false WHERE indrelid = 'executions'::regclass AND indexrelid <> 'executions_lease_idx'::regclass`);
    await client.query('SET LOCAL enable_seqscan = off');
    const custom = (await client.query<ExplainRows>(`EXPLAIN (FORMAT JSON) ${s.text}`, s.values)).rows[0]!['QUERY PLAN'][0]!.Plan;
    // what it runs inside (a function's statements), as they ran: set aside the same way
    const nested = await withNestedPlans(client, () => client.query(`EXPLAIN (ANALYZE, FORMAT JSON) ${s.text}`, s.values));
    if (s.text.includes('tes_claim_fair(')) expect(nested.map((n) => n.query).join('\n')).toContain('UPDATE executions'); // the pick, judged where it runs
    return [custom, ...nested.map((n) => n.plan)].some((plan) => scansOf(plan).some((f) => f.relation === 'executions' && f.node !== 'Seq Scan'));
  } finally {
    await client.query('ROLLBACK');
  }
}

it('only the reaper can reach executions_lease_idx; the line, its places, its counts and the fair claim cannot', async () => {
  const p = await seedProject(db, { creditMicros: 100_000 });
  const queued = [await submitTestExecution(db, p), await submitTestExecution(db, p), await submitTestExecution(db, p)];
  const line = await statementsOf(async () => {
    await queuePlaces(db, queued, { maxAgeMs: 0 });
    await categoryQueueStates(db);
    await claimNextFair(db, { category: 'test', owner: 'wrk_lease', leaseTtlMs: 60_000, share: 1, ownSlots: 4 });
  });
  const reaper = await statementsOf(() => reapExpiredLeases(db, { limit: 10, maxAttempts: MAX_ATTEMPTS, redispatchMs: 60_000 }));
  // the line itself is read from execution_line; the claim's update by id and the start rate read executions
  expect(line.length).toBeGreaterThanOrEqual(2);

  const client = new pg.Client({ connectionString: database.url });
  await client.connect();
  try {
    const reaches: string[] = [];
    for (const s of line) {
      if (await reachesLeaseIndex(client, s)) reaches.push(s.text.replace(/\s+/g, ' ').slice(0, 160));
    }
    expect(reaches).toEqual([]);
    // the check can see the index: the reaper's statement, planned the same way, uses it
    const reaperReaches = [];
    for (const s of reaper) reaperReaches.push(await reachesLeaseIndex(client, s));
    expect(reaperReaches).toContain(true);
  } finally {
    await client.end();
  }
});
