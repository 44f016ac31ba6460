import { abandonExecution, claimExecution, getSteps, markNeedsReview, reapExpiredLeases, settleExecution, sweepOutbox } from '@tes/db';
import { hit, LEASE_TTL_MS, MAX_ATTEMPTS, MIN, REDISPATCH_MS, setClock, type Real } from './model';

/**
 * Liveness, on the database alone: whatever state the commands left, the broker loses every
 * message it holds (a purge); then time passes in steps and after each the relay passes and a
 * worker runs whatever message it publishes to the end. Every accepted execution must end:
 * terminal, or needs_review (an operator's), never stranded with its money held.
 */
export async function checkLiveness(r: Real, startClock: number): Promise<void> {
  const db = r.db;
  let clock = startClock;
  const ours = async () => db('executions').whereIn('project_id', r.projectIds).select('id', 'project_id', 'status', 'reserved_micros');
  // the purge: what was published is gone; what is unsent now will be marked sent and dropped too
  await sweepOutbox(db, { graceMs: 0, limit: 10_000 }, async (rows) => ({ published: rows.map((row) => row.id), failed: [] }));
  for (let round = 0; round < 12; round++) {
    clock += 40 * MIN;
    await setClock(db, clock);
    const { exhausted } = await reapExpiredLeases(db, { limit: 10_000, maxAttempts: MAX_ATTEMPTS, redispatchMs: REDISPATCH_MS });
    for (const id of exhausted) await abandonExecution(db, { executionId: id, errorCode: 'delivery_limit_exceeded', errorMessage: 'liveness' });
    const delivered: string[] = [];
    await sweepOutbox(db, { graceMs: 0, limit: 10_000 }, async (rows) => {
      delivered.push(...rows.map((row) => row.message.executionId));
      return { published: rows.map((row) => row.id), failed: [] };
    });
    const mine = new Set((await ours()).map((e) => e.id as string));
    for (const id of delivered.filter((x) => mine.has(x))) {
      const e = await claimExecution(db, id, `liveness-${round}`, LEASE_TTL_MS);
      if (!e) continue;
      const owner = e.lease;
      const steps = await getSteps(db, e.projectId, [id]);
      if (steps.some((s) => s.status === 'running' && s.externalRef === null)) {
        await markNeedsReview(db, { executionId: id, owner, errorCode: 'provider_outcome_unknown', errorMessage: 'liveness' });
        continue;
      }
      const cost = steps.filter((s) => s.status === 'succeeded').reduce((a, s) => a + s.costMicros, 0);
      await settleExecution(db, {
        executionId: id,
        projectId: e.projectId,
        status: e.cancelRequested ? 'cancelled' : 'succeeded',
        chargedMicros: cost,
        from: ['running'],
        leaseOwner: owner,
      });
    }
    if ((await ours()).every((e) => !['queued', 'running', 'waiting'].includes(e.status as string))) {
      hit(`liveness:ended_after_${round + 1}_rounds`);
      return;
    }
  }
  const stuck = (await ours()).filter((e) => ['queued', 'running', 'waiting'].includes(e.status as string));
  throw new Error(`liveness: executions never ended: ${JSON.stringify(stuck)}`);
}
