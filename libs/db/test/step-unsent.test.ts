import { claimExecution, getSteps, isUnsentStep, recordExternalRef, recordStepUnsent, releaseLease, startStep } from '@tes/db';
import { seedProject, submitTestExecution, useTestDatabase } from '@tes/testing';

/**
 * A provider step whose create was refused (429, 503: nothing taken) records so and waits to
 * send it again (issue #28, item 7). Only that record lets a step without a provider reference
 * be resumed by a send; the step clears it before sending, so a crash after the send is an
 * unknown outcome (needs_review) as before, never a second request. Fenced by the lease, and
 * never over a reference.
 */
const { db } = useTestDatabase({ poolMax: 2 });

it('records and clears "nothing was taken" on a running step without a reference, fenced by the lease', async () => {
  const p = await seedProject(db, { creditMicros: 10_000 });
  const id = await submitTestExecution(db, p);
  const a = (await claimExecution(db, id, 'wrk_a', 30_000))!;
  expect(await startStep(db, { executionId: id, projectId: p.projectId, index: 0, name: 'generate', external: true, owner: a.lease })).toBe('started');
  const step = async () => (await getSteps(db, p.projectId, [id]))[0]!;
  expect(isUnsentStep(await step())).toBe(false); // started, nothing recorded: a crash now is an unknown outcome

  expect(await recordStepUnsent(db, { executionId: id, index: 0, owner: a.lease, checkpoint: { createAfter: 5 } })).toBe(true);
  expect(await step()).toMatchObject({ externalRef: null, checkpoint: { createAfter: 5, unsent: true } });
  expect(isUnsentStep(await step())).toBe(true);
  expect(await recordStepUnsent(db, { executionId: id, index: 0, owner: 'someone else', checkpoint: null })).toBe(false);

  // cleared before the send: a crash after it is never followed by a second send
  expect(await recordStepUnsent(db, { executionId: id, index: 0, owner: a.lease, checkpoint: null })).toBe(true);
  expect(isUnsentStep(await step())).toBe(false);

  // once the provider took the request, its reference rules: no "unsent" over it
  expect(await recordExternalRef(db, { executionId: id, index: 0, owner: a.lease, externalRef: 'job-1', checkpoint: { submittedAt: 1 } })).toBe(true);
  expect(await recordStepUnsent(db, { executionId: id, index: 0, owner: a.lease, checkpoint: { createAfter: 9 } })).toBe(false);
  expect(await releaseLease(db, id, a.lease, 60_000)).toBe(true);
  expect(await step()).toMatchObject({ externalRef: 'job-1', checkpoint: { submittedAt: 1 } });
});
