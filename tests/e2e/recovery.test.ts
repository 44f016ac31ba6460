import { AmqpClient } from '@tes/messaging';
import { bearer, projectBalance, waitForExecution, useStack } from '../stack';

/**
 * The relay's two recovery paths, provoked through the database the way a crash would
 * leave it: an outbox row never published (gateway died after commit), and a worker
 * lease that expired mid-execution (worker died or hung).
 */
const stack = useStack({ env: { LEASE_TTL_MS: '1500', OUTBOX_GRACE_MS: '300' } });

async function submit(secret: string, key: string, args: Record<string, unknown>, max: number) {
  const v = (await stack.http().get('/tools').set(bearer(secret))).body.data.priceVersion;
  const res = await stack
    .http()
    .post('/tools/test.sleep')
    .set({ ...bearer(secret), 'Idempotency-Key': key })
    .send({ tool: 'test.sleep', arguments: args, priceVersion: v, maximumChargeMicros: max });
  expect(res.status).toBe(202);
  return res.body.data.id as string;
}

it('an accepted execution whose message was lost is published by the relay and completes', async () => {
  const p = await stack.seed({ creditMicros: 10_000 });
  await stack.stopWorker();
  const id = await submit(p.secret, 'lost-message-1', { seconds: 0, steps: 1, costMicrosPerStep: 250 }, 250);
  // wait for the gateway's own publish to be confirmed and marked, then lose the message:
  // purge the queue and mark the outbox row unsent, as if the gateway died before publishing.
  // (bounded by the dispatcher's 10 s confirm timeout and its retry; a busy machine needs seconds)
  const publishedBy = Date.now() + 30_000;
  for (;;) {
    const row = await stack.db('outbox').where({ execution_id: id }).first();
    if (row?.published_at) break;
    if (Date.now() > publishedBy) throw new Error(`the gateway did not publish ${id} within 30 s`);
    await new Promise((r) => setTimeout(r, 50));
  }
  const amqp = new AmqpClient({ url: stack.config.amqpUrl, logger: stack.logger, name: 'test-purge' });
  await amqp.addSetup(async (conn) => {
    const ch = await conn.createChannel();
    const purged = await ch.purgeQueue(`${stack.config.amqpPrefix}executions.test`);
    expect(purged.messageCount).toBe(1);
    await ch.close();
  });
  await amqp.start();
  await amqp.stop();
  await stack.db('outbox').where({ execution_id: id }).update({ published_at: null });

  await stack.startWorker();
  const done = await waitForExecution(stack, p.secret, id);
  expect(done.status).toBe('succeeded');
  const row = await stack.db('outbox').where({ execution_id: id }).first();
  expect(row.published_at).not.toBeNull();
  expect(await projectBalance(stack.db, p.projectId)).toEqual({ available: 9_750, reserved: 0 });
});

it('an expired lease is reaped, the zombie worker is fenced out, and the work resumes after the last completed step', async () => {
  const p = await stack.seed({ creditMicros: 10_000 });
  const id = await submit(p.secret, 'lease-expiry-1', { seconds: 0.5, steps: 4, costMicrosPerStep: 1_000 }, 4_000);
  await waitForExecution(stack, p.secret, id, (e) => (e.progress as { completedSteps: number }).completedSteps >= 1);
  // The worker "hangs": its lease is taken away as the reaper would after expiry.
  await stack
    .db('executions')
    .where({ id })
    .update({ lease_expires_at: stack.db.raw("now() - interval '1 second'") });
  const done = await waitForExecution(stack, p.secret, id);
  expect(done.status).toBe('succeeded');
  expect(done.chargedMicros).toBe(4_000);
  const steps = await stack.db('execution_steps').where({ execution_id: id }).orderBy('index');
  expect(steps.map((s: { status: string }) => s.status)).toEqual(['succeeded', 'succeeded', 'succeeded', 'succeeded']);
  // completed steps were not run twice
  expect(steps[0].attempts).toBe(1);
  const exe = await stack.db('executions').where({ id }).first();
  // claimed twice; one lease was lost to the "crash" (a hand-back would spend none)
  expect(exe.claims).toBeGreaterThanOrEqual(2);
  expect(exe.attempts).toBe(1);
  const settlements = await stack.db('ledger_entries').where({ execution_id: id, kind: 'settle', account: 'charged' });
  expect(settlements).toHaveLength(1);
  expect(await projectBalance(stack.db, p.projectId)).toEqual({ available: 6_000, reserved: 0 });
  expect(stack.logs.text()).toContain('relay.lease.expired');
});
