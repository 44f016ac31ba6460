import { randomBytes } from 'node:crypto';
import type { Knex } from 'knex';
import { newId } from '@tes/core';
import { createDb, publishPrices, submitExecution } from '@tes/db';
import { AmqpClient, ConfirmPublisher, deleteTopology, topologyNames, topologySetup } from '@tes/messaging';
import { createMetrics, createNullLogger } from '@tes/observability';
import { createTestDatabase, seedProject, startTcpRelay, type TestDatabase } from '@tes/testing';
import { Relay } from '../src/relay';

/**
 * The relay against a broker that stops answering (a memory or disk alarm blocks publishers;
 * here a TCP relay to the real RabbitMQ that stops forwarding): the outbox sweep holds its rows
 * locked while publishes are out, so an unconfirmed publish must time out instead of stalling
 * the relay's whole pass (reaper and audit included). When the broker answers again the row is
 * published.
 */
const AMQP = new URL(process.env.TEST_AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672');
const logger = createNullLogger();
const names = topologyNames(`test.relay.${randomBytes(3).toString('hex')}.`);
let database: TestDatabase;
let db: Knex;

beforeAll(async () => {
  database = await createTestDatabase();
  db = createDb({ url: database.url, poolMax: 3 });
});
afterAll(async () => {
  const amqp = new AmqpClient({ url: AMQP.toString(), logger, name: 'test-cleanup' });
  await amqp.addSetup(async (conn) => {
    const ch = await conn.createChannel();
    await deleteTopology(ch, names, ['test']);
    await ch.close();
  });
  await amqp.start();
  await amqp.stop();
  await db?.destroy();
  await database?.drop();
});

it('an unconfirmed publish times out, the pass ends, and the row is published once the broker answers', async () => {
  const p = await seedProject(db, { creditMicros: 1_000 });
  const { priceVersion } = await publishPrices(db, { relay: 1 });
  const id = newId('exe');
  await submitExecution(db, {
    id,
    projectId: p.projectId,
    apiKeyId: p.keyId,
    tool: 'test.sleep',
    model: 'default',
    category: 'test',
    arguments: {},
    priceVersion,
    totalSteps: 1,
    reservedMicros: 100,
    idempotencyKey: 'relay-1',
    requestDigest: 'd',
    dispatchDeadlineMs: 60_000,
  });
  const proxy = await startTcpRelay(AMQP.toString(), 5672);
  const amqp = new AmqpClient({ url: proxy.url, logger, name: 'test-relay' });
  await amqp.addSetup(topologySetup(names, ['test']));
  const publisher = new ConfirmPublisher(amqp, names.exchange, logger);
  await publisher.start();
  await amqp.start();
  const relay = new Relay({
    db,
    publisher,
    logger,
    metrics: createMetrics('relay'),
    intervalMs: 60_000,
    graceMs: 0,
    redispatchMs: 60_000,
    deleteObject: async () => undefined,
    janitorIntervalMs: 60_000,
    publishTimeoutMs: 300,
  });
  try {
    proxy.holdRequests(true);
    const started = Date.now();
    expect(await relay.tick()).toMatchObject({ published: 0 });
    expect(Date.now() - started).toBeLessThan(3_000);
    const row = await db('outbox').where({ execution_id: id }).first();
    expect(row).toMatchObject({ published_at: null, attempts: 1 });
    expect(row.last_error).toMatch(/not confirmed within 300 ms/);

    proxy.holdRequests(false);
    expect(await relay.tick()).toMatchObject({ published: 1 });
    expect((await db('outbox').where({ execution_id: id }).first()).published_at).not.toBeNull();
  } finally {
    await relay.stop();
    await amqp.stop();
    await proxy.close();
  }
  // the message reached the work queue (once, or twice if the held publish was confirmed late: claims are fenced)
  const check = new AmqpClient({ url: AMQP.toString(), logger, name: 'test-check' });
  let messages = 0;
  await check.addSetup(async (conn) => {
    const ch = await conn.createChannel();
    messages = (await ch.checkQueue(names.queueFor('test'))).messageCount;
    await ch.close();
  });
  await check.start();
  await check.stop();
  expect(messages).toBeGreaterThanOrEqual(1);
});
