import { randomBytes } from 'node:crypto';
import amqp, { type Channel, type ChannelModel, type GetMessage } from 'amqplib';
import { createLogger } from '@tes/observability';
import { CaptureTransport } from '@tes/testing';
import { AmqpClient, Consumer, declareTopology, DELIVERY_LIMIT, deleteTopology, topologyNames, type Disposition } from '../src';

/**
 * What becomes of a message its handler gives up on: 'dead' sends it to the dead-letter queue
 * at once, 'retry' (and a handler that throws) puts it back, and the quorum queue's delivery
 * limit dead-letters a message that keeps coming back, so a poison message cannot loop
 * forever. Real RabbitMQ; a queue prefix of this file's own, removed afterwards.
 */
const AMQP_URL = process.env.TEST_AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672';
const CATEGORY = 'c';
const names = topologyNames(`test.deadletter.${randomBytes(4).toString('hex')}.`);
const queue = names.queueFor(CATEGORY);
let admin: ChannelModel;
let adminCh: Channel;
const running: { consumer: Consumer; client: AmqpClient }[] = [];

beforeAll(async () => {
  admin = await amqp.connect(AMQP_URL);
  adminCh = await admin.createChannel();
  await declareTopology(adminCh, names, [CATEGORY]);
});
afterEach(async () => {
  for (const { consumer, client } of running.splice(0)) {
    await consumer.stop();
    await client.stop();
  }
  await adminCh.purgeQueue(queue);
  await adminCh.purgeQueue(names.deadLetterQueue);
});
afterAll(async () => {
  await deleteTopology(adminCh, names, [CATEGORY]);
  await admin.close();
});

async function consume(handler: (payload: unknown, body: string) => Promise<Disposition>) {
  const logs = new CaptureTransport();
  const logger = createLogger({ service: 'test', level: 'debug', transports: [logs] });
  const client = new AmqpClient({ url: AMQP_URL, logger, name: 'test-dead-letter' });
  const consumer = new Consumer(client, { queue, concurrency: 1, handler: (payload, msg) => handler(payload, msg.content.toString('utf8')) }, logger);
  running.push({ consumer, client });
  await consumer.start();
  await client.start();
  return { logs };
}

function publish(body: string): void {
  adminCh.publish(names.exchange, CATEGORY, Buffer.from(body), { persistent: true, messageId: body });
}

/** The next dead letter, or undefined when none arrives in time. */
async function nextDeadLetter(timeoutMs = 5_000): Promise<GetMessage | undefined> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const msg = await adminCh.get(names.deadLetterQueue, { noAck: true });
    if (msg) return msg;
    if (Date.now() > deadline) return undefined;
    await new Promise((r) => setTimeout(r, 50));
  }
}

function deathReason(msg: GetMessage): unknown {
  const deaths = msg.properties.headers?.['x-death'] as { reason: string; queue: string }[] | undefined;
  return deaths?.map((d) => ({ reason: d.reason, queue: d.queue }));
}

it("a handler's 'dead' sends the message to the dead-letter queue at once, with its reason", async () => {
  const seen: unknown[] = [];
  await consume(async (payload) => {
    seen.push(payload);
    return 'dead';
  });
  publish(JSON.stringify({ executionId: 'exe_poison' }));
  const dead = await nextDeadLetter();
  expect(dead?.content.toString()).toBe('{"executionId":"exe_poison"}');
  expect(deathReason(dead!)).toEqual([{ reason: 'rejected', queue }]);
  expect(seen).toEqual([{ executionId: 'exe_poison' }]);
  expect((await adminCh.checkQueue(queue)).messageCount).toBe(0);
});

it('a message that is retried on every delivery is dead-lettered by the delivery limit, not looped forever', async () => {
  let deliveries = 0;
  await consume(async () => {
    deliveries += 1;
    return 'retry';
  });
  publish('{"executionId":"exe_loop"}');
  const dead = await nextDeadLetter(15_000);
  expect(dead?.content.toString()).toBe('{"executionId":"exe_loop"}');
  expect(deathReason(dead!)).toEqual([{ reason: 'delivery_limit', queue }]);
  // the first delivery and DELIVERY_LIMIT more
  expect(deliveries).toBe(DELIVERY_LIMIT + 1);
});

it('a handler that throws puts its message back (logged); the next delivery can ack it', async () => {
  const bodies: string[] = [];
  const { logs } = await consume(async (_payload, body) => {
    bodies.push(body);
    if (bodies.length === 1) throw new Error('database unreachable');
    return 'ack';
  });
  publish('{"executionId":"exe_flaky"}');
  const deadline = Date.now() + 5_000;
  while (bodies.length < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  await new Promise((r) => setTimeout(r, 200));
  expect(bodies).toEqual(['{"executionId":"exe_flaky"}', '{"executionId":"exe_flaky"}']);
  expect(logs.records.filter((r) => r.message === 'amqp.consumer.handler_failed')).toHaveLength(1);
  expect((await adminCh.checkQueue(queue)).messageCount).toBe(0);
  expect(await nextDeadLetter(300)).toBeUndefined();
});

it('a body that is not JSON reaches the handler as undefined (it decides), and is not lost on the way', async () => {
  const payloads: unknown[] = [];
  await consume(async (payload) => {
    payloads.push(payload);
    return 'dead';
  });
  publish('not json {');
  const dead = await nextDeadLetter();
  expect(payloads).toEqual([undefined]);
  expect(dead?.content.toString()).toBe('not json {');
});
