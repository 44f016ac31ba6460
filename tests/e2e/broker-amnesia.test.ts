import { AmqpClient, topologyNames } from '@tes/messaging';
import { bearer, projectBalance, useStack, waitForExecution } from '../stack';

/**
 * The broker carries hints; the database is the truth (issue #11). Whatever the broker loses,
 * every accepted execution still ends, exactly once, with the right charge: here every
 * execution queue, the delay queue included, is purged while work is queued, running and being
 * handed back by a gracefully stopping worker, and purged again after a new worker starts.
 * Recovery comes from the deadlines the relay enforces (DISPATCH_DEADLINE_MS for queued work,
 * the lease TTL for running and handed-back work); useStack audits the ledger afterwards.
 */
const stack = useStack({
  env: {
    DISPATCH_DEADLINE_MS: '1500',
    // long enough that a busy machine's late heartbeat does not lose a running lease (that is a
    // crash, which spends an attempt), short enough that lost running work is found in seconds
    LEASE_TTL_MS: '4000',
    WAIT_RECHECK_MS: '300',
    WORKER_CONCURRENCY: '2',
    // one project holds both slots here (fair share would give it one of two: docs/architecture.md#fair-share-of-the-worker-slots)
    PROJECT_SLOT_SHARE: '1',
    OUTBOX_GRACE_MS: '300',
    // the worker's drain is SHUTDOWN_TIMEOUT_MS − 5 s: none, so a stop hands running work back at once
    SHUTDOWN_TIMEOUT_MS: '5000',
  },
});

async function purgeAll(): Promise<number> {
  const { amqpPrefix, waitRecheckMs } = stack.config;
  let purged = 0;
  const amqp = new AmqpClient({ url: stack.config.amqpUrl, logger: stack.logger, name: 'test-purge' });
  await amqp.addSetup(async (conn) => {
    const ch = await conn.createChannel();
    const names = topologyNames(amqpPrefix, waitRecheckMs);
    for (const q of [names.queueFor('test'), names.waitQueueFor('test')]) purged += (await ch.purgeQueue(q)).messageCount;
    await ch.close();
  });
  await amqp.start();
  await amqp.stop();
  return purged;
}

it('every accepted execution ends exactly once with the right charge after every queue is purged', async () => {
  const p = await stack.seed({ creditMicros: 100_000 });
  const v = (await stack.http().get('/tools').set(bearer(p.secret))).body.data.priceVersion as string;
  const ids: string[] = [];
  for (let i = 0; i < 8; i++) {
    const res = await stack
      .http()
      .post('/tools/test.sleep')
      .set({ ...bearer(p.secret), 'Idempotency-Key': `amnesia-${i}` })
      .send({ tool: 'test.sleep', arguments: { seconds: 0.4, steps: 3, costMicrosPerStep: 100 }, priceVersion: v, maximumChargeMicros: 300 });
    expect(res.status).toBe(202);
    ids.push(res.body.data.id as string);
  }
  // two running (the worker's concurrency), six queued behind them
  // (a worker that starts slowly on a busy machine may take seconds: wait, bounded, and say so)
  const runningBy = Date.now() + 30_000;
  for (;;) {
    const running = await stack.db('executions').whereIn('id', ids).where({ status: 'running' }).whereNotNull('lease_owner').count({ n: '*' }).first();
    if (Number(running!.n) >= 2) break;
    if (Date.now() > runningBy) throw new Error('the worker did not start two executions within 30 s');
    await new Promise((r) => setTimeout(r, 50));
  }
  // a graceful stop hands the running ones back (re-sent through the delay queue) ...
  await stack.stopWorker();
  const handedBack = await stack.db('executions').whereIn('id', ids).where({ status: 'running' }).whereNull('lease_owner');
  expect(handedBack.length).toBeGreaterThanOrEqual(1);
  // ... and the broker forgets everything: the work queue and the delay queue
  expect(await purgeAll()).toBeGreaterThanOrEqual(6);
  await stack.startWorker();
  await new Promise((r) => setTimeout(r, 200));
  await purgeAll(); // and once more, with the new worker consuming

  const started = Date.now();
  for (const id of ids) {
    const done = await waitForExecution(stack, p.secret, id, undefined, 60_000);
    expect({ id, status: done.status, charged: done.chargedMicros }).toEqual({ id, status: 'succeeded', charged: 300 });
  }
  const recoverySeconds = (Date.now() - started) / 1000;
  for (const id of ids) {
    const settlements = await stack.db('ledger_entries').where({ execution_id: id, kind: 'settle', account: 'charged' });
    expect(settlements).toHaveLength(1);
    const steps = await stack.db('execution_steps').where({ execution_id: id, status: 'succeeded' });
    expect(steps).toHaveLength(3);
  }
  expect(await projectBalance(stack.db, p.projectId)).toEqual({ available: 100_000 - 8 * 300, reserved: 0 });
  // the hand-back spent no attempt: only crashes do
  expect((await stack.db('executions').whereIn('id', ids).max({ a: 'attempts' }).first())!.a).toBe(0);
  expect(stack.logs.text()).toContain('relay.execution.redispatched');
  console.log(`broker amnesia: 8 executions ended ${recoverySeconds.toFixed(1)} s after the purges (dispatch deadline 1.5 s, lease TTL 4 s)`);
});
