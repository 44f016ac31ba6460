import { newId } from '@tes/core';
import {
  auditLedger,
  claimExecution,
  enterWaiting,
  finishLastStepAndSettle,
  finishStep,
  getSteps,
  markNeedsReview,
  publishPrices,
  reapExpiredLeases,
  recordExternalRef,
  releaseLease,
  renewLease,
  settleExecution,
  startStep,
  submitExecution,
} from '@tes/db';
import { seedProject, useTestDatabase } from '@tes/testing';

/**
 * The lease fence is the claim, not the worker (issue #26, defect 2): a worker whose renewals
 * failed for longer than the TTL is reaped, and the same process may claim the execution again.
 * The stale run must then be fenced out of every write, as a stranger would be: renew, step
 * start, provider reference, step end, waiting, hand-back, needs_review and settle.
 */
const { db } = useTestDatabase({ poolMax: 3 });

afterEach(async () => {
  expect((await auditLedger(db)).problems).toEqual([]);
});

async function submitted(): Promise<{ id: string; projectId: string }> {
  const p = await seedProject(db, { creditMicros: 10_000 });
  const { priceVersion } = await publishPrices(db, { 'test.sleep': 1 });
  const id = newId('exe');
  await submitExecution(db, {
    id,
    projectId: p.projectId,
    apiKeyId: p.keyId,
    tool: 'test.sleep',
    model: 'sleep',
    category: 'test',
    arguments: {},
    priceVersion,
    totalSteps: 2,
    reservedMicros: 1_000,
    idempotencyKey: id,
    requestDigest: 'd',
    dispatchDeadlineMs: 60_000,
  });
  return { id, projectId: p.projectId };
}

it('a stale run of the same worker, reaped and claimed again, is fenced out of every write', async () => {
  const e = await submitted();
  const first = (await claimExecution(db, e.id, 'wrk_same', 30_000))!;
  expect(await startStep(db, { executionId: e.id, projectId: e.projectId, index: 0, name: 's0', owner: first.lease, external: true })).toBe('started');
  expect(await recordExternalRef(db, { executionId: e.id, index: 0, owner: first.lease, externalRef: 'job-A' })).toBe(true);

  // its renewals fail past the TTL; the reaper hands the execution back; the same process claims it again
  await db('executions')
    .where({ id: e.id })
    .update({ lease_expires_at: db.raw("tes_now() - interval '1 second'") });
  expect((await reapExpiredLeases(db, { limit: 100, maxAttempts: 5, redispatchMs: 60_000 })).leasesLost).toContain(e.id);
  const second = (await claimExecution(db, e.id, 'wrk_same', 30_000))!;
  expect(second.lease).not.toBe(first.lease);
  expect(second.stepsRecorded).toBe(true);
  expect(await recordExternalRef(db, { executionId: e.id, index: 0, owner: second.lease, externalRef: 'job-B' })).toBe(true);

  const stale = { executionId: e.id, projectId: e.projectId, owner: first.lease };
  expect(await renewLease(db, e.id, first.lease, 30_000)).toBeNull();
  expect(await recordExternalRef(db, { ...stale, index: 0, externalRef: 'job-A2' })).toBe(false);
  expect(await startStep(db, { ...stale, index: 1, name: 's1' })).toBe('lease_lost');
  expect(await finishStep(db, { ...stale, index: 0, status: 'succeeded', costMicros: 100 })).toBe(false);
  expect(await enterWaiting(db, { executionId: e.id, owner: first.lease, recheckDeadlineMs: 1_000 })).toBe(false);
  expect(await releaseLease(db, e.id, first.lease, 1_000)).toBe(false);
  expect(await markNeedsReview(db, { executionId: e.id, owner: first.lease, errorCode: 'provider_outcome_unknown', errorMessage: 'x' })).toBe(false);
  const settle = {
    executionId: e.id,
    projectId: e.projectId,
    status: 'succeeded' as const,
    chargedMicros: 100,
    from: ['running' as const],
    leaseOwner: first.lease,
  };
  expect(await settleExecution(db, settle)).toBeNull();
  expect(await finishLastStepAndSettle(db, { ...stale, index: 0, status: 'succeeded', costMicros: 100 }, settle)).toBeNull();

  // the current claim's provider reference stands, and the current claim goes on
  expect((await getSteps(db, e.projectId, [e.id]))[0]).toMatchObject({ status: 'running', externalRef: 'job-B' });
  expect(await renewLease(db, e.id, second.lease, 30_000)).toEqual({ cancelRequested: false });
  expect(
    await finishLastStepAndSettle(
      db,
      { executionId: e.id, projectId: e.projectId, index: 0, owner: second.lease, status: 'succeeded', costMicros: 100 },
      {
        ...settle,
        leaseOwner: second.lease,
      },
    ),
  ).toMatchObject({ chargedMicros: 100 });
});

it('a lease is the worker and the claim number: fresh at each claim, and never a bare worker id', async () => {
  const e = await submitted();
  const first = (await claimExecution(db, e.id, 'wrk_a', 30_000))!;
  expect(first).toMatchObject({ lease: 'wrk_a:1', leaseOwner: 'wrk_a:1' });
  // a bare worker id (what a previous release fences by) matches no lease written by a claim
  expect(await renewLease(db, e.id, 'wrk_a', 30_000)).toBeNull();
  expect(await releaseLease(db, e.id, first.lease, 1_000)).toBe(true);
  expect((await claimExecution(db, e.id, 'wrk_a', 30_000))!.lease).toBe('wrk_a:2');
});
