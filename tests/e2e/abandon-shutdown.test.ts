import { AmqpClient, topologyNames } from '@tes/messaging';
import { settleExecution } from '@tes/db';
import { bearer, projectBalance, waitForExecution, useStack } from '../stack';

/**
 * Work nobody can finish ends with its money handled; work a stopping worker cannot
 * finish is handed to another worker, which resumes it.
 */
const stack = useStack({ worker: false, env: { LEASE_TTL_MS: '1500' } });

async function submit(secret: string, key: string, args: Record<string, unknown>, max: number): Promise<string> {
  const v = (await stack.http().get('/tools').set(bearer(secret))).body.data.priceVersion;
  const res = await stack
    .http()
    .post('/tools/test.sleep')
    .set({ ...bearer(secret), 'Idempotency-Key': key })
    .send({ tool: 'test.sleep', arguments: args, priceVersion: v, maximumChargeMicros: max });
  expect(res.status).toBe(202);
  return res.body.data.id;
}

async function deadLetter(payload: Record<string, unknown>): Promise<void> {
  const names = topologyNames(stack.config.amqpPrefix);
  const amqp = new AmqpClient({ url: stack.config.amqpUrl, logger: stack.logger, name: 'test-dlx' });
  await amqp.addSetup(async (conn) => {
    const ch = await conn.createConfirmChannel();
    ch.publish(names.deadLetterExchange, '', Buffer.from(JSON.stringify(payload)), { persistent: true });
    await ch.waitForConfirms();
    await ch.close();
  });
  await amqp.start();
  await amqp.stop();
}

async function until(check: () => Promise<boolean>, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 100));
  }
}

it('a dead-lettered execution fails, charged only for completed steps, the rest released', async () => {
  const p = await stack.seed({ creditMicros: 10_000 });
  const id = await submit(p.secret, 'dead-letter-01', { seconds: 0, steps: 3, costMicrosPerStep: 1_000 }, 3_000);
  // as if one step had completed before the workers started crashing on it
  await stack.db('executions').where({ id }).update({ status: 'running', attempts: 5, started_at: stack.db.fn.now() });
  await stack
    .db('execution_steps')
    .insert({ execution_id: id, project_id: p.projectId, index: 0, name: 'sleep_0', status: 'succeeded', cost_micros: 1_000, finished_at: stack.db.fn.now() });
  await deadLetter({ executionId: id, projectId: p.projectId });
  const done = await waitForExecution(stack, p.secret, id);
  expect(done).toMatchObject({ status: 'failed', errorCode: 'delivery_limit_exceeded', chargedMicros: 1_000 });
  expect(await projectBalance(stack.db, p.projectId)).toEqual({ available: 9_000, reserved: 0 });
  // a malformed dead letter is dropped without harm
  await deadLetter({ nothing: true });
});

it('a dead-lettered execution with a provider step of unknown outcome goes to needs_review, reservation held, until an operator resolves it', async () => {
  const p = await stack.seed({ creditMicros: 10_000 });
  const id = await submit(p.secret, 'dead-letter-02', { seconds: 0, steps: 2, costMicrosPerStep: 2_000 }, 4_000);
  await stack.db('executions').where({ id }).update({ status: 'running', started_at: stack.db.fn.now() });
  await stack.db('execution_steps').insert({ execution_id: id, project_id: p.projectId, index: 0, name: 'sleep_0', status: 'running', external: true });
  await deadLetter({ executionId: id, projectId: p.projectId });
  const review = await waitForExecution(stack, p.secret, id);
  expect(review).toMatchObject({ status: 'needs_review', chargedMicros: 0, reservedMicros: 4_000 });
  expect(await projectBalance(stack.db, p.projectId)).toEqual({ available: 6_000, reserved: 4_000 });
  expect((await stack.audit()).ok).toBe(true);
  const resolved = await settleExecution(stack.db, {
    executionId: id,
    projectId: p.projectId,
    status: 'succeeded',
    chargedMicros: 2_500,
    from: ['needs_review'],
    kind: 'resolve',
  });
  expect(resolved?.chargedMicros).toBe(2_500);
  expect(await projectBalance(stack.db, p.projectId)).toEqual({ available: 7_500, reserved: 0 });
});

it('an execution whose lease expired after its last allowed attempt is abandoned by the reaper, not handed out again', async () => {
  const p = await stack.seed({ creditMicros: 10_000 });
  const id = await submit(p.secret, 'exhausted-01', { seconds: 0, steps: 1, costMicrosPerStep: 500 }, 500);
  await stack
    .db('executions')
    .where({ id })
    .update({ status: 'running', attempts: 5, lease_owner: 'wrk_dead', lease_expires_at: stack.db.raw("now() - interval '1 second'") });
  const done = await waitForExecution(stack, p.secret, id);
  expect(done).toMatchObject({ status: 'failed', errorCode: 'delivery_limit_exceeded', chargedMicros: 0 });
  expect(await projectBalance(stack.db, p.projectId)).toEqual({ available: 10_000, reserved: 0 });
  expect(await stack.db('outbox').where({ execution_id: id })).toHaveLength(1); // only the submit's own row
});

it('a worker stopped mid-execution hands it back; another worker resumes after the last completed step', async () => {
  const p = await stack.seed({ creditMicros: 10_000 });
  const first = await stack.startWorker();
  const id = await submit(p.secret, 'shutdown-01', { seconds: 0.6, steps: 3, costMicrosPerStep: 1_000 }, 3_000);
  // mid-step: the first step has completed and the second is running
  await until(async () => (await stack.db('execution_steps').where({ execution_id: id, index: 1, status: 'running' })).length === 1);
  // SIGTERM's path with no drain time: in-flight steps are aborted and released
  const consumers = first.parts.find((part) => part.name === 'consumers')!;
  first.engine.abortAll();
  await consumers.stop();
  await stack.stopWorker();
  const released = await stack.db('executions').where({ id }).first();
  expect(released.status).toBe('running');
  expect(released.lease_owner).toBeNull();

  await stack.startWorker();
  const done = await waitForExecution(stack, p.secret, id);
  expect(done).toMatchObject({ status: 'succeeded', chargedMicros: 3_000 });
  const steps = await stack.db('execution_steps').where({ execution_id: id }).orderBy('index');
  expect(steps[0].attempts).toBe(1); // the completed step was not run again
  expect(steps[1].attempts).toBe(2); // the interrupted one was
  await stack.stopWorker();
});
