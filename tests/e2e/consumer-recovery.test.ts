import amqp from 'amqplib';
import { Catalog } from '@tes/catalog';
import { declareTopology, topologyNames } from '@tes/messaging';
import { bearer, useStack, waitForExecution } from '../stack';

/**
 * Issue #11: the broker ended a worker's subscription while its connection stayed up (the
 * consumer ack timeout closed the channel); the queue was left with no consumer and the
 * worker still answered /readyz 200. Now /readyz says not_ready while a queue has no live
 * consumer here, and the worker subscribes again by itself.
 *
 * The loss is provoked from the broker's side: the queue is deleted (its consumers get
 * basic.cancel, and re-subscribing fails until it is declared again). The ack-timeout close
 * itself and a PRECONDITION_FAILED channel close are in libs/messaging/test and
 * tests/faults/ack-timeout.faults.ts.
 */
const stack = useStack();

async function readyz(): Promise<{ status: number; body: unknown }> {
  const res = await fetch(`http://127.0.0.1:${stack.worker!.metricsPort}/readyz`);
  return { status: res.status, body: await res.json() };
}

async function until(what: string, check: () => Promise<boolean>, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for: ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

it('a worker whose consumer the broker ended is not ready until it has subscribed again, then takes work', async () => {
  expect(await readyz()).toEqual({ status: 200, body: { status: 'ready' } });
  const names = topologyNames(stack.config.amqpPrefix, stack.config.waitRecheckMs);
  const queue = names.queueFor('test');
  const admin = await amqp.connect(stack.config.amqpUrl);
  try {
    const ch = await admin.createChannel();
    await ch.deleteQueue(queue);
    await until('/readyz to answer not_ready', async () => (await readyz()).status === 503);
    expect((await readyz()).body).toEqual({ status: 'not_ready' });
    // still not ready while the queue is missing (the worker keeps retrying)
    await new Promise((r) => setTimeout(r, 800));
    expect((await readyz()).status).toBe(503);

    await declareTopology(ch, names, new Catalog({ enableTestTools: true }).categories());
    await until('/readyz to answer ready again', async () => (await readyz()).status === 200);
    expect((await ch.checkQueue(queue)).consumerCount).toBe(1);
  } finally {
    await admin.close();
  }

  const p = await stack.seed({ creditMicros: 10_000 });
  const v = (await stack.http().get('/tools').set(bearer(p.secret))).body.data.priceVersion;
  const res = await stack
    .http()
    .post('/tools/test.sleep')
    .set({ ...bearer(p.secret), 'Idempotency-Key': 'after-consumer-loss' })
    .send({ tool: 'test.sleep', arguments: { seconds: 0, steps: 1, costMicrosPerStep: 250 }, priceVersion: v, maximumChargeMicros: 250 });
  expect(res.status).toBe(202);
  const done = await waitForExecution(stack, p.secret, res.body.data.id as string);
  expect(done.status).toBe('succeeded');
  const events = stack.logs.records.filter((r) => r.queue === queue).map((r) => r.message);
  expect(events.filter((e) => e === 'amqp.consumer.lost')).toHaveLength(1);
  expect(events.filter((e) => e === 'amqp.consumer.recreated')).toHaveLength(1);
});
