import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { promisify } from 'node:util';
import amqp, { type Channel, type ChannelModel } from 'amqplib';
import { createLogger } from '@tes/observability';
import { CaptureTransport } from '@tes/testing';
import { AmqpClient, Consumer, declareTopology, deleteTopology, topologyNames, type Disposition, type TopologyNames } from '../src';

/**
 * A consumer whose subscription the broker ends while the connection stays up (a channel
 * error, a basic.cancel) subscribes again; one whose connection goes is left to the
 * connection's replay. Real RabbitMQ over a socket; every test has a queue prefix of its own
 * and removes it.
 */
const AMQP_URL = process.env.TEST_AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672';
const CATEGORY = 'c';

interface Delivery {
  body: string;
  redelivered: boolean;
}

interface Harness {
  names: TopologyNames;
  queue: string;
  name: string;
  logs: CaptureTransport;
  client: AmqpClient;
  consumer: Consumer;
  deliveries: Delivery[];
  /** A connection of the test's own, standing for the broker's operator. */
  admin: ChannelModel;
  adminCh: Channel;
  publish(body: string): void;
  /** How many times an event was logged. */
  count(event: string): number;
}

const open: Harness[] = [];

async function harness(handle: (body: string, redelivered: boolean) => Promise<Disposition> = async () => 'ack'): Promise<Harness> {
  const id = randomBytes(4).toString('hex');
  const names = topologyNames(`test.consumer.${id}.`);
  const queue = names.queueFor(CATEGORY);
  const admin = await amqp.connect(AMQP_URL);
  const adminCh = await admin.createChannel();
  await declareTopology(adminCh, names, [CATEGORY]);
  const logs = new CaptureTransport();
  const logger = createLogger({ service: 'test', level: 'debug', transports: [logs] });
  const name = `test-consumer-${id}`;
  const client = new AmqpClient({ url: AMQP_URL, logger, name });
  const deliveries: Delivery[] = [];
  const consumer = new Consumer(
    client,
    {
      queue,
      concurrency: 2,
      handler: (_payload, msg) => {
        const body = msg.content.toString('utf8');
        deliveries.push({ body, redelivered: msg.fields.redelivered });
        return handle(body, msg.fields.redelivered);
      },
    },
    logger,
  );
  await consumer.start();
  await client.start();
  const h: Harness = {
    names,
    queue,
    name,
    logs,
    client,
    consumer,
    deliveries,
    admin,
    adminCh,
    publish: (body) => {
      adminCh.publish(names.exchange, CATEGORY, Buffer.from(body), { persistent: true });
    },
    count: (event) => logs.records.filter((r) => r.message === event).length,
  };
  open.push(h);
  return h;
}

afterEach(async () => {
  for (const h of open.splice(0)) {
    await h.consumer.stop();
    await h.client.stop();
    await deleteTopology(h.adminCh, h.names, [CATEGORY]);
    await h.admin.close();
  }
});

async function until(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for: ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

const delay = (ms: number) => new Promise((r) => setTimeout(r, ms));
const rabbitmqctl = async (...args: string[]) => (await promisify(execFile)('rabbitmqctl', ['-q', ...args])).stdout;

/**
 * Makes the broker close the consumer channels of one connection (by its client-given name)
 * with 406 PRECONDITION_FAILED, the reply a delivery left unacked past the consumer timeout
 * gets: the channel process is handed a basic.ack of a delivery tag it never issued, as if
 * the client had sent it. Touches only that connection's channels on the shared broker.
 */
async function failConsumerChannels(connectionName: string): Promise<void> {
  const out = await rabbitmqctl(
    'eval',
    `[rabbit_channel:do(Ch, {'basic.ack', 999999, false}) || Ch <- rabbit_channel:list_local(),
       [{connection, C}, {consumer_count, N}] <- [rabbit_channel:info(Ch, [connection, consumer_count])], N > 0,
       [{client_properties, Props}] <- [rabbit_reader:info(C, [client_properties])],
       lists:member({<<"connection_name">>, longstr, <<"${connectionName}">>}, Props)].`,
  );
  if (out.trim() !== '[ok]') throw new Error(`expected one consumer channel of ${connectionName}, got ${out}`);
}

/** Consumers the broker has on the queue (all of them: only this test's consumer uses it). */
async function consumerCount(h: Harness): Promise<number> {
  return (await h.adminCh.checkQueue(h.queue)).consumerCount;
}

it('a consumer cancelled by the broker (its queue deleted) subscribes again, with backoff, once the queue is back', async () => {
  const h = await harness();
  h.publish('before');
  await until('the first message', () => h.deliveries.length === 1);
  const consumingBefore = h.consumer.consuming;

  await h.adminCh.deleteQueue(h.queue); // the broker sends basic.cancel to its consumers
  // the queue is missing for a while: every attempt fails (404 on consume), the consumer stays down
  await delay(1_000);
  const consumingWhileMissing = h.consumer.consuming;
  const failedAttempts = h.count('amqp.consumer.resubscribe_failed');

  await declareTopology(h.adminCh, h.names, [CATEGORY]);
  h.publish('after');
  await until('the message published after the queue came back', () => h.deliveries.some((d) => d.body === 'after'));

  expect(await consumerCount(h)).toBe(1);
  expect([consumingBefore, consumingWhileMissing, h.consumer.consuming]).toEqual([true, false, true]);
  expect(failedAttempts).toBeGreaterThanOrEqual(2);
  expect(h.count('amqp.consumer.lost')).toBe(1);
  expect(h.count('amqp.consumer.recreated')).toBe(1);
  const recreated = h.logs.records.find((r) => r.message === 'amqp.consumer.recreated');
  expect(recreated).toMatchObject({ queue: h.queue, reason: 'consumer cancelled by the broker' });
  // a channel-level loss: the connection stayed up throughout
  expect(h.count('amqp.connection.lost')).toBe(0);
  expect(h.count('amqp.connection.ready')).toBe(1);
});

it('a channel the broker closes with PRECONDITION_FAILED is re-created; the held message is redelivered there and settled once', async () => {
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));
  const h = await harness(async (body, redelivered) => {
    // the first delivery of "held" is the long render: it outlives its channel
    if (body === 'held' && !redelivered) await held;
    return 'ack';
  });
  try {
    h.publish('held');
    await until('the held message', () => h.deliveries.length === 1);

    await failConsumerChannels(h.name);
    // the broker requeued the unacked message; only a re-created consumer gets it again
    await until('the redelivery', () => h.deliveries.some((d) => d.body === 'held' && d.redelivered));
    expect(h.consumer.consuming).toBe(true);
    const lost = h.logs.records.find((r) => r.message === 'amqp.consumer.lost');
    expect(String(lost?.reason)).toContain('PRECONDITION_FAILED - unknown delivery tag 999999');

    // the render on the dead channel ends: it must not be settled anywhere (its tag belongs to
    // the dead channel; on the new one it would be unknown, a second PRECONDITION_FAILED)
    release();
    h.publish('after');
    await until('the message published after the loss', () => h.deliveries.some((d) => d.body === 'after'));
    await until('the queue to be empty', async () => (await h.adminCh.checkQueue(h.queue)).messageCount === 0);
    await delay(200);
    expect(h.count('amqp.consumer.lost')).toBe(1);
    expect(h.count('amqp.consumer.recreated')).toBe(1);
    expect(h.count('amqp.consumer.settle_failed')).toBe(0);
    expect(h.count('amqp.connection.lost')).toBe(0);
    expect(await consumerCount(h)).toBe(1);
    // the redelivered copy was acked on the live channel: nothing left unacked or queued
    expect(h.deliveries.map((d) => d.body).sort()).toEqual(['after', 'held', 'held']);
  } finally {
    release(); // else stop() would wait for the held handler forever
  }
});

it('stop() during a recovery ends it: nothing subscribes afterwards and nothing is left waiting', async () => {
  const h = await harness();
  await h.adminCh.deleteQueue(h.queue);
  await until('the first failed attempt', () => h.logs.records.some((r) => r.message === 'amqp.consumer.resubscribe_failed'));
  const started = Date.now();
  await h.consumer.stop();
  expect(Date.now() - started).toBeLessThan(1_000); // does not sit out the backoff
  await declareTopology(h.adminCh, h.names, [CATEGORY]);
  await delay(1_500); // longer than the next few backoffs
  expect(await consumerCount(h)).toBe(0);
  expect(h.count('amqp.consumer.lost')).toBe(1);
  expect(h.consumer.consuming).toBe(false);
  expect(h.count('amqp.consumer.recreated')).toBe(0);
});

it("a connection the broker closes is the connection layer's: one replay, no consumer-level recovery", async () => {
  const h = await harness();
  const connections = await rabbitmqctl('list_connections', 'pid', 'client_properties');
  const pid = connections
    .split('\n')
    .find((l) => l.includes(`{"connection_name","${h.name}"}`))
    ?.split('\t')[0];
  if (!pid) throw new Error(`connection ${h.name} not found in rabbitmqctl list_connections`);
  await rabbitmqctl('close_connection', pid, 'test: connection closed by the broker');
  await until('the reconnect', () => h.count('amqp.connection.ready') === 2);
  h.publish('after');
  await until('the message published after the reconnect', () => h.deliveries.some((d) => d.body === 'after'));
  await delay(500); // a stray recovery would have woken by now
  expect(await consumerCount(h)).toBe(1);
  expect(h.consumer.consuming).toBe(true);
  expect(h.count('amqp.connection.lost')).toBe(1);
  expect(h.count('amqp.consumer.lost')).toBe(0);
  expect(h.count('amqp.consumer.recreated')).toBe(0);
});
