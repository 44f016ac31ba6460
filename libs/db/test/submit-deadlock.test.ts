import { newId } from '@tes/core';
import { auditLedger, claimExecution, publishPrices, settleExecution, submitExecution } from '@tes/db';
import { seedProject, useTestDatabase } from '@tes/testing';

/**
 * A resend of a bound key while the worker settles that execution. The settle statement
 * updates the execution row, then the project's balance row; a submit that locked the balance
 * row first and then inserted the same key would wait on the execution row (a unique check waits
 * for a transaction that updated the conflicting row): each waits for the other, and Postgres
 * kills one (40P01). The submit must not take the balance row for a key that is already bound.
 */
const { db } = useTestDatabase({ poolMax: 8 });

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

/** Polls `check` until it holds; fails with `what` after a generous deadline (the machine may be loaded). */
async function until(what: string, check: () => Promise<boolean>): Promise<void> {
  const by = Date.now() + 20_000;
  while (!(await check())) {
    if (Date.now() > by) throw new Error(`timed out waiting until ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Backends of this database waiting on a heavyweight lock (advisory, tuple, transaction). */
async function lockWaiters(kind?: 'advisory'): Promise<number> {
  const res = await db.raw<{ rows: { n: number }[] }>(
    `SELECT count(*)::int AS n FROM pg_locks l JOIN pg_database d ON d.oid = l.database OR l.database IS NULL
      WHERE NOT l.granted AND d.datname = current_database() AND (:kind::text IS NULL OR l.locktype = :kind::text)`,
    { kind: kind ?? null },
  );
  return res.rows[0]!.n;
}

/**
 * Issue #26, defect 4, ordered statement by statement with four connections (pg_locks tells who
 * waits where). A resend R starts while its original O is in flight: R's statement snapshot
 * predates O's commit, so its `NOT EXISTS` on the key sees nothing; it waits on the key's lock.
 * O commits; another submit C holds the balance row at that moment, so R, past the key's lock,
 * queues on it. A worker claims O's execution and settles it: the settlement updates the
 * execution row and queues on the balance row behind R. C ends: R took the balance row and
 * inserted the key, whose unique check waited for the settlement's update of O's row, while
 * the settlement waited for R's balance row: 40P01, and one of them was killed. Fixed, the guard
 * reads the binding again under the key's lock with a fresh snapshot: R takes no balance row.
 */
it('a resend that started while its original was in flight never deadlocks the settlement of that original', async () => {
  const p = await seedProject(db, { creditMicros: 100_000 });
  const { priceVersion } = await publishPrices(db, { deadlock: 2 });
  const input = (id: string, idempotencyKey: string) => ({
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
    idempotencyKey,
    requestDigest: 'd',
    dispatchDeadlineMs: 60_000,
  });
  // O: the original, in flight (its statement ran; it holds the key's lock and the balance row)
  const original = await db.transaction();
  const o = await submitExecution(original, input(newId('exe'), 'in-flight-key'));
  expect(o.kind).toBe('created');
  // R: the resend, its snapshot taken now; it waits on the key's lock
  const resend = submitExecution(db, input(newId('exe'), 'in-flight-key')).then(
    (r) => ({ ok: r }),
    (err: unknown) => ({ err: err as { code?: string } }),
  );
  await until('the resend waits on the key lock', async () => (await lockWaiters('advisory')) === 1);
  // C: another transaction on the project's balance row (a submit, a settlement) queues on it, and has it once O commits
  const concurrent = await db.transaction();
  const cPid = (await concurrent.raw<{ rows: { pid: number }[] }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
  const cLocked = concurrent.raw('SELECT 1 FROM projects WHERE id = ? FOR UPDATE', [p.projectId]).then(() => undefined); // knex runs a query once it is then'd
  await until(
    'the other submit waits on the balance row',
    async () => (await db.raw('SELECT 1 FROM pg_locks WHERE pid = ? AND NOT granted', [cPid])).rows.length > 0,
  );
  await original.commit();
  await cLocked;
  // R, past the key's lock: answered at once (fixed), or queued on the balance row behind C
  let resendDone = false;
  void resend.then(() => (resendDone = true));
  await until('the resend is answered or waits on the balance row', async () => resendDone || (await lockWaiters()) === 1);
  // W: a worker claims O's execution and settles it: execution row first, then the balance row
  const id = o.execution.id;
  const claimed = await claimExecution(db, id, 'wrk_w', 60_000);
  expect(claimed).not.toBeNull();
  const settlement = settleExecution(db, {
    executionId: id,
    projectId: p.projectId,
    status: 'succeeded',
    chargedMicros: 60,
    from: ['running'],
    leaseOwner: claimed!.lease, // the claim's fence
  }).then(
    (r) => ({ ok: r }),
    (err: unknown) => ({ err: err as { code?: string } }),
  );
  const waiting = resendDone ? 0 : 1;
  await until('the settlement waits on the balance row', async () => (await lockWaiters()) === waiting + 1);
  await concurrent.rollback();
  const [r, w] = await Promise.all([resend, settlement]);
  // before the fix: one of the two was killed with 40P01 (deadlock detected)
  expect({ resend: 'err' in r ? r.err.code : 'ok', settlement: 'err' in w ? w.err.code : 'ok' }).toEqual({ resend: 'ok', settlement: 'ok' });
  expect('ok' in r && r.ok).toMatchObject({ kind: 'existing', execution: { id } });
  expect('ok' in w && w.ok).toMatchObject({ id, chargedMicros: 60 });
  expect(await db('projects').where({ id: p.projectId }).first('reserved_micros', 'available_micros')).toEqual({
    reserved_micros: 0,
    available_micros: 100_000 - 60,
  });
  expect((await auditLedger(db)).ok).toBe(true);
});
