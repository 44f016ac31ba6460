import { newId } from '@tes/core';
import { publishPrices, submitExecution } from '@tes/db';
import { seedProject, useTestDatabase } from '@tes/testing';

/**
 * A resend of a bound key while the worker settles that execution. The settle statement
 * updates the execution row, then the project's balance row; a submit that locked the balance
 * row first and then inserted the same key would wait on the execution row (a unique check waits
 * for a transaction that updated the conflicting row): each waits for the other, and Postgres
 * kills one (40P01). The submit must not take the balance row for a key that is already bound.
 */
const { db } = useTestDatabase({ poolMax: 4 });

it('a resend during the settlement of its execution answers from the binding, no deadlock', async () => {
  const p = await seedProject(db, { creditMicros: 100_000 });
  const { priceVersion } = await publishPrices(db, { deadlock: 1 });
  const input = (id: string) => ({
    id,
    projectId: p.projectId,
    apiKeyId: p.keyId,
    tool: 'test.sleep',
    model: 'sleep',
    category: 'test',
    arguments: {},
    priceVersion,
    totalSteps: 1,
    reservedMicros: 100,
    idempotencyKey: 'bound-key-1',
    requestDigest: 'd',
    dispatchDeadlineMs: 60_000,
  });
  const first = await submitExecution(db, input(newId('exe')));
  expect(first.kind).toBe('created');
  const id = first.execution.id;

  await db.transaction(async (settle) => {
    // the settlement's order: the execution row first ...
    await settle('executions').where({ id }).update({ updated_at: settle.fn.now() });
    const resend = submitExecution(db, input(newId('exe')));
    await new Promise((r) => setTimeout(r, 300)); // the resend runs meanwhile
    // ... then the balance row: with the old submit this is where one of them was killed
    await settle('projects')
      .where({ id: p.projectId })
      .update({ available_micros: settle.raw('available_micros') });
    const answered = await Promise.race([resend, new Promise<'waiting'>((r) => setTimeout(() => r('waiting'), 100))]);
    // the resend does not wait on the settlement at all: it read the binding from its snapshot
    expect(answered === 'waiting' ? 'waiting' : answered.kind).toBe('existing');
  });
  const after = await db('projects').where({ id: p.projectId }).first('reserved_micros');
  expect(Number(after.reserved_micros)).toBe(100);
});
