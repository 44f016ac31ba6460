import { claimExecution, finishStep, getSteps, recordExternalRef, releaseLease, startStep } from '@tes/db';
import { seedProject, submitTestExecution, useTestDatabase } from '@tes/testing';

/**
 * A provider step that starts again starts clean (issue #26, defect 5). If it kept the previous
 * create's job reference, a worker that died after the new create and before recording its
 * reference would leave the old reference behind, and the next worker would resume polling the
 * old job (run.ts `resuming`) instead of sending the execution to needs_review, while the new
 * job is billed and untracked.
 */
const { db } = useTestDatabase({ poolMax: 2 });

it('a restarted step has no provider reference or checkpoint of the previous start', async () => {
  const p = await seedProject(db, { creditMicros: 10_000 });
  const id = await submitTestExecution(db, p);
  const step = { executionId: id, projectId: p.projectId, index: 0, name: 'generate', external: true };
  const a = (await claimExecution(db, id, 'wrk_a', 30_000))!;
  expect(await startStep(db, { ...step, owner: a.lease })).toBe('started');
  expect(await recordExternalRef(db, { executionId: id, index: 0, owner: a.lease, externalRef: 'job-A', checkpoint: { submittedAt: 1 } })).toBe(true);
  // the step ends failed but the execution is not settled (the lease was lost in between): the next claim restarts it
  expect(await finishStep(db, { ...step, owner: a.lease, status: 'failed', costMicros: 0, errorCode: 'provider_error' })).toBe(true);
  expect(await releaseLease(db, id, a.lease, 60_000)).toBe(true);

  const b = (await claimExecution(db, id, 'wrk_b', 30_000))!;
  expect(await startStep(db, { ...step, owner: b.lease })).toBe('started');
  // (worker b creates job-B here and dies before recording it)
  const [restarted] = await getSteps(db, p.projectId, [id]);
  expect(restarted).toMatchObject({ status: 'running', attempts: 2, externalRef: null, checkpoint: null });

  // a waiting provider step's re-check is not a restart: its reference stays
  expect(await recordExternalRef(db, { executionId: id, index: 0, owner: b.lease, externalRef: 'job-B', checkpoint: { submittedAt: 2 } })).toBe(true);
  expect(await releaseLease(db, id, b.lease, 60_000)).toBe(true);
  expect(await claimExecution(db, id, 'wrk_c', 30_000)).toMatchObject({ stepsRecorded: true });
  expect((await getSteps(db, p.projectId, [id]))[0]).toMatchObject({ status: 'running', externalRef: 'job-B', checkpoint: { submittedAt: 2 } });
});
