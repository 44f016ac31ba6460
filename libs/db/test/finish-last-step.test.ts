import { newId } from '@tes/core';
import { claimExecution, finishLastStepAndSettle, getProject, publishPrices, startStep, submitExecution } from '@tes/db';
import { seedProject, useTestDatabase } from '@tes/testing';

/**
 * finishLastStepAndSettle: an execution's last step end and its settlement in one statement,
 * all or nothing, fenced by the lease (what the worker runs after its last step).
 */
const { db } = useTestDatabase({ poolMax: 4 });

async function running(owner: string): Promise<{ id: string; projectId: string; lease: string }> {
  const p = await seedProject(db, { creditMicros: 10_000 });
  const { priceVersion } = await publishPrices(db, { 'test.sleep': 1 });
  const id = newId('exe');
  const r = await submitExecution(db, {
    id,
    projectId: p.projectId,
    apiKeyId: p.keyId,
    tool: 'test.sleep',
    model: 'sleep',
    category: 'test',
    arguments: {},
    priceVersion,
    totalSteps: 1,
    reservedMicros: 1_000,
    idempotencyKey: `k-${id}`,
    requestDigest: 'd',
    dispatchDeadlineMs: 60_000,
  });
  expect(r.kind).toBe('created');
  const claimed = await claimExecution(db, id, owner, 30_000);
  expect(claimed?.lease).toBe(`${owner}:1`);
  expect(await startStep(db, { executionId: id, projectId: p.projectId, index: 0, name: 'sleep', owner: claimed!.lease })).toBe('started');
  return { id, projectId: p.projectId, lease: claimed!.lease };
}

const artifact = () => ({
  id: newId('art'),
  format: 'txt',
  mimeType: 'text/plain',
  sizeBytes: 3,
  sha256: 'ab'.repeat(32),
  storageKey: `k/${newId('art')}.txt`,
  fileName: 'x.txt',
  expiresAt: new Date(Date.now() + 86_400_000),
});

const call = (e: { id: string; projectId: string }, owner: string, costMicros: number) =>
  finishLastStepAndSettle(
    db,
    { executionId: e.id, projectId: e.projectId, index: 0, owner, status: 'succeeded', costMicros, checkpoint: { facts: { n: 1 } }, artifacts: [artifact()] },
    { executionId: e.id, projectId: e.projectId, status: 'succeeded', chargedMicros: costMicros, from: ['running'], leaseOwner: owner, output: { n: 1 } },
  );

it('records the step, its artifacts and the settlement together, with the journal balanced', async () => {
  const e = await running('w1');
  const settled = await call(e, e.lease, 300);
  expect(settled).toMatchObject({ id: e.id, reservedMicros: 1_000, chargedMicros: 300 });
  const row = await db('executions').where({ id: e.id }).first();
  expect(row).toMatchObject({ status: 'succeeded', charged_micros: 300, lease_owner: null });
  expect(await db('execution_steps').where({ execution_id: e.id })).toEqual([expect.objectContaining({ status: 'succeeded', cost_micros: 300 })]);
  expect(await db('artifacts').where({ execution_id: e.id })).toHaveLength(1);
  expect(await getProject(db, e.projectId)).toMatchObject({ availableMicros: 10_000 - 300, reservedMicros: 0 });
  const journal = await db('ledger_entries').where({ execution_id: e.id }).sum({ total: 'amount_micros' }).first();
  expect(Number(journal!.total)).toBe(0);
});

it('writes nothing when the lease is not held, or when the step is not running', async () => {
  const e = await running('w1');
  expect(await call(e, 'zombie', 300)).toBeNull();
  expect(await db('executions').where({ id: e.id }).first()).toMatchObject({ status: 'running', lease_owner: e.lease, charged_micros: 0 });
  expect(await db('execution_steps').where({ execution_id: e.id })).toEqual([expect.objectContaining({ status: 'running' })]);
  expect(await db('artifacts').where({ execution_id: e.id })).toHaveLength(0);
  expect(await getProject(db, e.projectId)).toMatchObject({ availableMicros: 9_000, reservedMicros: 1_000 });

  // the step already ended (a second call, or another path recorded it): the settlement does not run either
  await db('execution_steps').where({ execution_id: e.id }).update({ status: 'failed' });
  expect(await call(e, e.lease, 300)).toBeNull();
  expect(await db('executions').where({ id: e.id }).first()).toMatchObject({ status: 'running', charged_micros: 0 });
  expect(await db('artifacts').where({ execution_id: e.id })).toHaveLength(0);
});

it('writes nothing when another worker claims the expired lease while the statement waits for the row', async () => {
  const e = await running('w1');
  await db('executions')
    .where({ id: e.id })
    .update({ lease_expires_at: db.raw("now() - interval '1 second'") });
  const trx = await db.transaction();
  try {
    expect(await claimExecution(trx, e.id, 'w2', 30_000)).not.toBeNull();
    const pending = call(e, e.lease, 300);
    // the statement reaches the row the claim holds, and waits for it (no fixed sleep)
    for (let waiting = 0; waiting === 0;) {
      const r = await db.raw<{ rows: { n: number }[] }>(
        `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%UPDATE execution_steps s%'`,
      );
      waiting = r.rows[0]!.n;
      if (waiting === 0) await new Promise((resolve) => setTimeout(resolve, 20));
    }
    await trx.commit();
    expect(await pending).toBeNull();
  } finally {
    if (!trx.isCompleted()) await trx.rollback();
  }
  expect(await db('executions').where({ id: e.id }).first()).toMatchObject({ status: 'running', lease_owner: 'w2:2', charged_micros: 0 });
  expect(await db('execution_steps').where({ execution_id: e.id })).toEqual([expect.objectContaining({ status: 'running' })]);
  expect(await db('artifacts').where({ execution_id: e.id })).toHaveLength(0);
  expect(await db('ledger_entries').where({ execution_id: e.id, kind: 'settle' })).toHaveLength(0);
  expect(await getProject(db, e.projectId)).toMatchObject({ availableMicros: 9_000, reservedMicros: 1_000 });
});

it('settles once: a redelivered last step finds the execution ended and changes nothing; a charge above the reservation is cut to it', async () => {
  const e = await running('w1');
  expect(await call(e, e.lease, 5_000)).toMatchObject({ reservedMicros: 1_000, chargedMicros: 1_000 });
  const journal = await db('ledger_entries').where({ execution_id: e.id, kind: 'settle' });
  expect(journal.map((j: { amount_micros: number }) => j.amount_micros).sort((a, b) => a - b)).toEqual([-1_000, 0, 1_000]);
  const entries = (await db('ledger_entries').where({ execution_id: e.id })).length;
  // the same outcome again (a redelivery, a resend after a lost answer): nothing more is written
  expect(await call(e, e.lease, 5_000)).toBeNull();
  expect(await db('ledger_entries').where({ execution_id: e.id })).toHaveLength(entries);
  expect(await db('artifacts').where({ execution_id: e.id })).toHaveLength(1);
  expect(await getProject(db, e.projectId)).toMatchObject({ availableMicros: 9_000, reservedMicros: 0 });
});
