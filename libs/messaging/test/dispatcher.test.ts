import { randomBytes } from 'node:crypto';
import amqp, { type Channel, type ChannelModel, type GetMessage } from 'amqplib';
import { createLogger } from '@tes/observability';
import { CaptureTransport, startTcpRelay } from '@tes/testing';
import { AmqpClient, ConfirmPublisher, declareTopology, deleteTopology, OutboxDispatcher, topologyNames } from '../src';

/**
 * The gateway's dispatcher on a real broker: a row is marked published only after the broker
 * confirmed its message, confirmed rows are marked in one batch, a publish that fails or is
 * never confirmed leaves its row for the relay, and stop() waits for what is in flight and
 * marks it. Marking is the caller's (libs/db's markOutboxPublished); here it is recorded.
 */
const AMQP_URL = process.env.TEST_AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672';
const CATEGORY = 'c';
const names = topologyNames(`test.dispatch.${randomBytes(4).toString('hex')}.`);
let admin: ChannelModel;
let adminCh: Channel;
const cleanups: (() => Promise<void>)[] = [];

beforeAll(async () => {
  admin = await amqp.connect(AMQP_URL);
  adminCh = await admin.createChannel();
  await declareTopology(adminCh, names, [CATEGORY]);
});
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
  await adminCh.purgeQueue(names.queueFor(CATEGORY));
});
afterAll(async () => {
  await deleteTopology(adminCh, names, [CATEGORY]);
  await admin.close();
});

async function setup(o: { url?: string; exchange?: string; markIntervalMs?: number; publishTimeoutMs?: number; markFails?: boolean } = {}) {
  const logs = new CaptureTransport();
  const logger = createLogger({ service: 'test', level: 'debug', transports: [logs] });
  const client = new AmqpClient({ url: o.url ?? AMQP_URL, logger, name: 'test-dispatcher' });
  const publisher = new ConfirmPublisher(client, o.exchange ?? names.exchange, logger);
  await publisher.start();
  await client.start();
  cleanups.push(() => client.stop());
  const marks: number[][] = [];
  const counted: number[] = [];
  const dispatcher = new OutboxDispatcher(
    publisher,
    async (ids) => {
      if (o.markFails) throw new Error('database unreachable');
      marks.push([...ids].sort());
    },
    logger,
    (n) => counted.push(n),
    o.markIntervalMs ?? 20,
    o.publishTimeoutMs,
  );
  const events = (event: string) => logs.records.filter((r) => r.message === event);
  return { dispatcher, marks, counted, events };
}

const entry = (id: number) => ({ id, routingKey: CATEGORY, message: { executionId: `exe_${id}`, projectId: 'prj_1' }, traceparent: null });

async function queued(): Promise<GetMessage[]> {
  const out: GetMessage[] = [];
  for (let m = await adminCh.get(names.queueFor(CATEGORY), { noAck: true }); m; m = await adminCh.get(names.queueFor(CATEGORY), { noAck: true })) out.push(m);
  return out;
}

it('publishes each row with its outbox id as message id, then marks the confirmed rows in one batch', async () => {
  const { dispatcher, marks, counted } = await setup({ markIntervalMs: 300 });
  for (const id of [1, 2, 3]) dispatcher.dispatch(entry(id));
  await new Promise((r) => setTimeout(r, 600));
  expect(marks).toEqual([[1, 2, 3]]);
  expect(counted).toEqual([3]);
  const messages = await queued();
  expect(messages.map((m) => m.properties.messageId).sort()).toEqual(['outbox-1', 'outbox-2', 'outbox-3']);
  expect(JSON.parse(messages.find((m) => m.properties.messageId === 'outbox-2')!.content.toString())).toEqual({ executionId: 'exe_2', projectId: 'prj_1' });
  expect(messages.every((m) => m.properties.deliveryMode === 2)).toBe(true); // persistent
  await dispatcher.stop();
  expect(marks).toEqual([[1, 2, 3]]); // nothing marked twice
});

it('stop() waits for the publishes in flight and marks them before it resolves', async () => {
  const { dispatcher, marks } = await setup({ markIntervalMs: 60_000 });
  dispatcher.dispatch(entry(7));
  dispatcher.dispatch(entry(8));
  await dispatcher.stop();
  expect(marks).toEqual([[7, 8]]);
  expect((await queued()).length).toBe(2);
});

it('a publish the broker refuses is not marked: the row stays for the relay', async () => {
  // an exchange that does not exist: the broker closes the channel (404) instead of confirming
  const { dispatcher, marks, events } = await setup({ exchange: `${names.exchange}.missing` });
  dispatcher.dispatch(entry(11));
  await dispatcher.stop();
  expect(marks).toEqual([]);
  expect(events('outbox.publish_deferred')).toEqual([expect.objectContaining({ outboxId: 11, executionId: 'exe_11' })]);
});

it('a publish never confirmed (a blocked broker) is given up after its timeout and not marked', async () => {
  const relay = await startTcpRelay(AMQP_URL, 5672);
  cleanups.push(() => relay.close());
  const { dispatcher, marks, events } = await setup({ url: relay.url, publishTimeoutMs: 300 });
  relay.holdRequests(true);
  const started = Date.now();
  dispatcher.dispatch(entry(21));
  await dispatcher.stop();
  expect(Date.now() - started).toBeLessThan(2_000);
  expect(marks).toEqual([]);
  expect(events('outbox.publish_deferred')).toEqual([expect.objectContaining({ outboxId: 21, err: 'not confirmed within 300 ms' })]);
  relay.holdRequests(false);
});

it('a mark that fails is logged and not counted: the rows stay unsent and the relay publishes them again', async () => {
  const { dispatcher, counted, events } = await setup({ markFails: true });
  dispatcher.dispatch(entry(31));
  await dispatcher.stop();
  expect(counted).toEqual([]);
  expect(events('outbox.mark_deferred')).toEqual([expect.objectContaining({ count: 1, err: 'database unreachable' })]);
  expect((await queued()).length).toBe(1);
});
