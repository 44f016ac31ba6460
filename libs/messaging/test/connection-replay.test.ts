import { randomBytes } from 'node:crypto';
import net from 'node:net';
import amqp from 'amqplib';
import { createLogger } from '@tes/observability';
import { CaptureTransport, startTcpRelay } from '@tes/testing';
import { AmqpClient, ConfirmPublisher, Consumer, deleteTopology, topologyNames, topologySetup } from '../src';

/**
 * The connection's promise: after the broker goes away and comes back, every setup hook is
 * replayed in the order it was added (the topology before the consumers that need it), so a
 * broker that lost its queues meanwhile gets them declared again, and publishing and consuming
 * go on without anyone restarting. The network is a TCP relay in front of the real RabbitMQ,
 * which the test cuts and restores; a queue prefix of this file's own.
 */
const AMQP_URL = process.env.TEST_AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672';
const CATEGORY = 'c';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for: ${what}`);
    await sleep(20);
  }
}

/** Asked on a connection of its own: a missing queue closes the channel that asks. */
async function queueExists(queue: string): Promise<boolean> {
  const conn = await amqp.connect(AMQP_URL);
  try {
    const ch = await conn.createChannel();
    ch.on('error', () => undefined);
    return await ch.checkQueue(queue).then(
      () => true,
      () => false,
    );
  } finally {
    await conn.close().catch(() => undefined);
  }
}

function capture() {
  const logs = new CaptureTransport();
  const logger = createLogger({ service: 'test', level: 'debug', transports: [logs] });
  return { logs, logger, count: (event: string) => logs.records.filter((r) => r.message === event).length };
}

it('after a lost connection the topology is declared again before the consumer subscribes, and messages flow again', async () => {
  const names = topologyNames(`test.replay.${randomBytes(4).toString('hex')}.`);
  const admin = await amqp.connect(AMQP_URL);
  const adminCh = await admin.createChannel();
  const relay = await startTcpRelay(AMQP_URL, 5672);
  const { logger, count } = capture();
  const client = new AmqpClient({ url: relay.url, logger, name: 'test-replay' });
  const received: string[] = [];
  const consumer = new Consumer(
    client,
    { queue: names.queueFor(CATEGORY), concurrency: 1, handler: async (_p, msg) => (received.push(msg.content.toString()), 'ack') },
    logger,
  );
  const publisher = new ConfirmPublisher(client, names.exchange, logger);
  try {
    // the order services use: topology, then publisher, then consumers
    await client.addSetup(topologySetup(names, [CATEGORY]));
    await publisher.start();
    await consumer.start();
    await client.start();
    await publisher.publish(CATEGORY, { n: 1 }, { messageId: 'm1' });
    await until('the first message', () => received.length === 1);

    await relay.cut();
    await until('the loss to be seen', () => !client.connected);
    // the broker forgets the topology while the client is away (a node rebuilt from scratch)
    await deleteTopology(adminCh, names, [CATEGORY]);
    expect(await queueExists(names.queueFor(CATEGORY))).toBe(false);

    await relay.restore();
    await until('the reconnect', () => client.connected && consumer.consuming);
    // every queue is back, with the arguments it was declared with (a redeclare with others would fail)
    for (const q of [names.queueFor(CATEGORY), names.waitQueueFor(CATEGORY), names.deadLetterQueue]) {
      expect((await adminCh.checkQueue(q)).queue).toBe(q);
    }
    expect((await adminCh.checkQueue(names.queueFor(CATEGORY))).consumerCount).toBe(1);
    await publisher.publish(CATEGORY, { n: 2 }, { messageId: 'm2' });
    await until('the message published after the reconnect', () => received.length === 2);
    expect(received).toEqual(['{"n":1}', '{"n":2}']);
    expect(count('amqp.connection.lost')).toBe(1);
    expect(count('amqp.connection.ready')).toBe(2);
  } finally {
    await consumer.stop();
    await client.stop();
    await relay.close();
    await deleteTopology(adminCh, names, [CATEGORY]);
    await admin.close();
  }
});

it('stop() during the reconnect backoff returns at once and nothing connects afterwards', async () => {
  const relay = await startTcpRelay(AMQP_URL, 5672);
  const { logger, count } = capture();
  const client = new AmqpClient({ url: relay.url, logger, name: 'test-replay-stop' });
  const changes: boolean[] = [];
  client.onConnectionChange((connected) => changes.push(connected));
  try {
    await client.start();
    await relay.cut();
    await until('the loss to be seen', () => !client.connected);
    await until('a failed reconnect', () => count('amqp.reconnect.failed') >= 1);
    const started = Date.now();
    await client.stop();
    expect(Date.now() - started).toBeLessThan(1_000);
    await relay.restore();
    await sleep(1_000); // past the next backoffs
    expect(client.connected).toBe(false);
    expect(count('amqp.connection.ready')).toBe(1);
    expect(changes).toEqual([true, false]);
  } finally {
    await client.stop();
    await relay.close();
  }
});

it('a first connection that cannot be made fails the start after initialTimeoutMs, without the password in the error', async () => {
  // a port nothing listens on
  const server = net.createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((r) => server.close(() => r()));
  const { logger } = capture();
  const client = new AmqpClient({ url: `amqp://guest:s3cret-pass@127.0.0.1:${port}`, logger, name: 'test-refused', initialTimeoutMs: 500 });
  const started = Date.now();
  const failure = await client.start().then(
    () => undefined,
    (err: unknown) => err as Error,
  );
  expect(failure?.message).toMatch(new RegExp(`^cannot connect to RabbitMQ at amqp://guest:\\*\\*\\*@127\\.0\\.0\\.1:${port}`));
  expect(failure?.message).not.toContain('s3cret-pass');
  expect(Date.now() - started).toBeLessThan(3_000);
  expect(client.connected).toBe(false);
  await client.stop();
});
