import { randomBytes } from 'node:crypto';
import amqp from 'amqplib';
import { createNullLogger } from '@tes/observability';
import { AmqpClient, Consumer, declareTopology, deleteTopology, topologyNames, type Delivery } from '../src';

/**
 * Early settlement (issue #11, fix (c)): a handler whose state is durable acks its message at
 * once and runs on; the consumer still runs at most `concurrency` handlers, and a message that
 * waits too long for a slot goes to onOverflow. Real RabbitMQ over a socket.
 */
const AMQP_URL = process.env.TEST_AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

it('an early ack frees the message at once, yet only `concurrency` handlers run; a message that waits too long overflows', async () => {
  const names = topologyNames(`test.early.${randomBytes(4).toString('hex')}.`);
  const queue = names.queueFor('c');
  const admin = await amqp.connect(AMQP_URL);
  const adminCh = await admin.createChannel();
  await declareTopology(adminCh, names, ['c']);
  const client = new AmqpClient({ url: AMQP_URL, logger: createNullLogger(), name: 'test-early-ack' });
  const events: string[] = [];
  let running = 0;
  let maxRunning = 0;
  const consumer = new Consumer(
    client,
    {
      queue,
      concurrency: 1,
      maxWaitMs: 2_000,
      handler: async (_p, msg, delivery: Delivery) => {
        const body = msg.content.toString();
        running += 1;
        maxRunning = Math.max(maxRunning, running);
        events.push(`start ${body}`);
        delivery.settle('ack'); // durable from here
        await sleep(3_000);
        events.push(`end ${body}`);
        running -= 1;
        return 'retry'; // ignored: already settled
      },
      onOverflow: async (_p, msg) => {
        events.push(`overflow ${msg.content.toString()}`);
        return 'ack';
      },
    },
    createNullLogger(),
  );
  try {
    await consumer.start();
    await client.start();
    adminCh.publish(names.exchange, 'c', Buffer.from('a'), { persistent: true });
    adminCh.publish(names.exchange, 'c', Buffer.from('b'), { persistent: true });
    await sleep(3_300);
    expect(maxRunning).toBe(1);
    // 'a' was acked though its handler ran on, so the broker handed over 'b' (prefetch 1: without
    // the early ack it would have come only after 'a' ended); 'b' waited 2 s for the slot 'a'
    // held and went to onOverflow
    expect(events).toEqual(['start a', 'overflow b', 'end a']);
    expect((await adminCh.checkQueue(queue)).messageCount).toBe(0);
    adminCh.publish(names.exchange, 'c', Buffer.from('c'), { persistent: true });
    await sleep(3_300);
    expect(events.slice(3)).toEqual(['start c', 'end c']);
  } finally {
    await consumer.stop();
    await client.stop();
    await deleteTopology(adminCh, names, ['c']);
    await admin.close();
  }
});

it('stop() hands a message still waiting for a slot to onOverflow at once, not at the end of the drain', async () => {
  const names = topologyNames(`test.early.${randomBytes(4).toString('hex')}.`);
  const queue = names.queueFor('c');
  const admin = await amqp.connect(AMQP_URL);
  const adminCh = await admin.createChannel();
  await declareTopology(adminCh, names, ['c']);
  const client = new AmqpClient({ url: AMQP_URL, logger: createNullLogger(), name: 'test-early-ack-stop' });
  const events: string[] = [];
  const consumer = new Consumer(
    client,
    {
      queue,
      concurrency: 1,
      maxWaitMs: 60_000,
      handler: async (_p, msg, delivery: Delivery) => {
        events.push(`start ${msg.content.toString()}`);
        delivery.settle('ack');
        await sleep(2_000);
        events.push(`end ${msg.content.toString()}`);
        return 'ack';
      },
      onOverflow: async (_p, msg) => {
        events.push(`overflow ${msg.content.toString()}`);
        return 'ack';
      },
    },
    createNullLogger(),
  );
  try {
    await consumer.start();
    await client.start();
    adminCh.publish(names.exchange, 'c', Buffer.from('a'), { persistent: true });
    adminCh.publish(names.exchange, 'c', Buffer.from('b'), { persistent: true });
    await sleep(300);
    expect(events).toEqual(['start a']); // 'b' waits for the slot 'a' holds
    // a draining worker's handlers may run for minutes: 'b' is decided now (the worker re-sends
    // it through the delay queue), not left unacked on the channel until the drain ends
    await consumer.stop();
    expect(events).toEqual(['start a', 'overflow b', 'end a']);
    expect((await adminCh.checkQueue(queue)).messageCount).toBe(0);
  } finally {
    await consumer.stop();
    await client.stop();
    await deleteTopology(adminCh, names, ['c']);
    await admin.close();
  }
});
