import { AmqpClient, Consumer, declareTopology, topologyNames } from '@tes/messaging';
import { createLogger } from '@tes/observability';
import { CaptureTransport } from '@tes/testing';
import amqplib from 'amqplib';
import { PrivateRabbit } from './private-infra';

/**
 * The real trigger of issue #11: a delivery held unacked past the broker's consumer timeout
 * (30 min by default; RabbitMQ 3.10 sets it only node-wide, in rabbitmq.conf) makes the
 * broker close the consumer's channel with PRECONDITION_FAILED while the connection stays up.
 * Run on a RabbitMQ node of this suite's own with `consumer_timeout = 1000`: the shared broker
 * is never reconfigured. 3.10 checks the timeout on its channel tick, once a minute, so the
 * close comes ≈60 s after the delivery whatever the setting (measured: 60.2 s). The consumer must subscribe again by itself, get the requeued
 * message there and settle it once; the held handler's late result is not settled anywhere.
 */
let rmq: PrivateRabbit | undefined;

beforeAll(async () => {
  rmq = await PrivateRabbit.start({ conf: 'consumer_timeout = 1000' });
}, 180_000);

afterAll(async () => {
  await rmq?.destroy();
}, 120_000);

async function until(what: string, check: () => boolean | Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for: ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

it('a delivery held past the consumer timeout: the broker closes the channel, the consumer subscribes again and gets the message back', async () => {
  const names = topologyNames('acktimeout.');
  const queue = names.queueFor('image');
  const admin = await amqplib.connect(rmq!.url);
  const adminCh = await admin.createChannel();
  await declareTopology(adminCh, names, ['image']);
  const logs = new CaptureTransport();
  const logger = createLogger({ service: 'test', level: 'debug', transports: [logs] });
  const client = new AmqpClient({ url: rmq!.url, logger, name: 'ack-timeout' });
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));
  const deliveries: boolean[] = [];
  const consumer = new Consumer(
    client,
    {
      queue,
      concurrency: 1,
      handler: async (_payload, msg) => {
        deliveries.push(msg.fields.redelivered);
        if (!msg.fields.redelivered) await held; // the heavy render
        return 'ack';
      },
    },
    logger,
  );
  const count = (event: string) => logs.records.filter((r) => r.message === event).length;
  try {
    await consumer.start();
    await client.start();
    adminCh.publish(names.exchange, 'image', Buffer.from('{}'), { persistent: true });
    await until('the first delivery', () => deliveries.length === 1, 10_000);
    const heldAt = Date.now();
    await until('the broker to close the channel', () => count('amqp.consumer.lost') === 1, 120_000);
    const closedAfterMs = Date.now() - heldAt;
    const lost = logs.records.find((r) => r.message === 'amqp.consumer.lost');
    expect(String(lost?.reason)).toMatch(/PRECONDITION_FAILED.*(acknowledgement|ack).*timed out/i);

    await until('the consumer to subscribe again', () => count('amqp.consumer.recreated') === 1, 10_000);
    expect(consumer.consuming).toBe(true);
    // The broker hands the message back to the new subscription, but the held handler still
    // takes the only slot (concurrency 1 counts running handlers, whatever their channel): the
    // redelivery runs once that handler ends, never beside it.
    await new Promise((r) => setTimeout(r, 500));
    expect(deliveries).toEqual([false]);
    release();
    await until('the redelivery to the re-created consumer', () => deliveries.length === 2, 10_000);
    expect(deliveries).toEqual([false, true]);
    await until('the queue to be empty', async () => (await adminCh.checkQueue(queue)).messageCount === 0, 10_000);
    await new Promise((r) => setTimeout(r, 500)); // the held handler's late result had time to (wrongly) settle
    expect(count('amqp.consumer.lost')).toBe(1);
    expect(count('amqp.consumer.recreated')).toBe(1);
    expect(count('amqp.consumer.settle_failed')).toBe(0);
    expect(count('amqp.connection.lost')).toBe(0);
    expect((await adminCh.checkQueue(queue)).consumerCount).toBe(1);
    process.stdout.write(`\nconsumer_timeout 1000 ms: the broker closed the channel ${closedAfterMs} ms after the delivery: ${String(lost?.reason)}\n`);
  } finally {
    release();
    await consumer.stop();
    await client.stop();
    await admin.close();
  }
}, 180_000);
