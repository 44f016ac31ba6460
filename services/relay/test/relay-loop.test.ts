import { randomBytes } from 'node:crypto';
import type { Knex } from 'knex';
import amqp, { type Channel, type ChannelModel } from 'amqplib';
import { newId } from '@tes/core';
import { createDb, MAX_ATTEMPTS, publishPrices, recordUpload, submitExecution } from '@tes/db';
import { AmqpClient, ConfirmPublisher, declareTopology, deleteTopology, topologyNames, topologySetup } from '@tes/messaging';
import { createLogger, createMetrics, type Metrics } from '@tes/observability';
import { CaptureTransport, createTestDatabase, seedProject, type SeededProject, type TestDatabase } from '@tes/testing';
import { Relay, type RelayOptions } from '../src/relay';

/**
 * The relay's loops on real Postgres and RabbitMQ: start() sweeps at once and then every
 * interval, the reaper hands back expired leases (and gives up on exhausted ones), the
 * janitor runs on its own interval, and stop() ends both loops: after it nothing is swept,
 * published or deleted. A database and a queue prefix of this file's own.
 */
const AMQP_URL = process.env.TEST_AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672';
const names = topologyNames(`test.relayloop.${randomBytes(3).toString('hex')}.`);
let database: TestDatabase;
let db: Knex;
let admin: ChannelModel;
let adminCh: Channel;
let client: AmqpClient;
let publisher: ConfirmPublisher;
let project: SeededProject;
let priceVersion: string;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

beforeAll(async () => {
  database = await createTestDatabase();
  db = createDb({ url: database.url, poolMax: 4 });
  admin = await amqp.connect(AMQP_URL);
  adminCh = await admin.createChannel();
  await declareTopology(adminCh, names, ['test']);
  const logger = createLogger({ service: 'test', transports: [new CaptureTransport()] });
  client = new AmqpClient({ url: AMQP_URL, logger, name: 'test-relay-loop' });
  await client.addSetup(topologySetup(names, ['test']));
  publisher = new ConfirmPublisher(client, names.exchange, logger);
  await publisher.start();
  await client.start();
  project = await seedProject(db, { creditMicros: 1_000_000 });
  ({ priceVersion } = await publishPrices(db, { relayLoop: 1 }));
});
afterAll(async () => {
  await client?.stop();
  await deleteTopology(adminCh, names, ['test']);
  await admin?.close();
  await db?.destroy();
  await database?.drop();
});
afterEach(async () => {
  await adminCh.purgeQueue(names.queueFor('test'));
});

/** A relay whose publishes and deletes are counted; the rest is real. */
function relayWith(o: Partial<RelayOptions> = {}) {
  const logs = new CaptureTransport();
  const published: string[] = [];
  const deleted: string[] = [];
  const metrics: Metrics = createMetrics('relay', false);
  const relay = new Relay({
    db,
    publisher: { publish: (routingKey, payload, options) => (published.push(options.messageId), publisher.publish(routingKey, payload, options)) },
    logger: createLogger({ service: 'test', level: 'debug', transports: [logs] }),
    metrics,
    intervalMs: 60_000,
    graceMs: 0,
    redispatchMs: 60_000,
    deleteObject: async (key) => void deleted.push(key),
    janitorIntervalMs: 60_000,
    ...o,
  });
  return { relay, published, deleted, metrics, events: (e: string) => logs.records.filter((r) => r.message === e) };
}

async function submit(reservedMicros = 100): Promise<string> {
  const id = newId('exe');
  await submitExecution(db, {
    id,
    projectId: project.projectId,
    apiKeyId: project.keyId,
    tool: 'test.sleep',
    model: 'default',
    category: 'test',
    arguments: {},
    priceVersion,
    totalSteps: 1,
    reservedMicros,
    idempotencyKey: `loop-${id}`,
    requestDigest: 'd',
    dispatchDeadlineMs: 60_000,
  });
  return id;
}

const unsent = async (executionId: string) => (await db('outbox').where({ execution_id: executionId }).whereNull('published_at')).length;

async function until(what: string, check: () => Promise<boolean> | boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for: ${what}`);
    await sleep(25);
  }
}

it('start() sweeps at once and then every interval; after stop() nothing more is published', async () => {
  const first = await submit();
  const { relay, published } = relayWith({ intervalMs: 200 });
  relay.start();
  try {
    await until('the first row to be published', async () => (await unsent(first)) === 0);
    const second = await submit();
    await until('the next pass to publish the second row', async () => (await unsent(second)) === 0);
  } finally {
    await relay.stop();
  }
  const count = published.length;
  const third = await submit();
  await sleep(600); // three intervals
  expect(await unsent(third)).toBe(1);
  expect(published).toHaveLength(count);
  const queued = await adminCh.checkQueue(names.queueFor('test'));
  expect(queued.messageCount).toBe(count);
  await relay.stop(); // a second stop is harmless
});

it('stop() waits for the pass under way: when it resolves, the pass has finished', async () => {
  const id = await submit();
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));
  // the publish of this pass is held until the test lets it go
  const { relay: slow } = relayWith({ publisher: { publish: async (rk, payload, options) => (await held, publisher.publish(rk, payload, options)) } });
  slow.start();
  await sleep(300);
  let stopped = false;
  const stopping = slow.stop().then(() => (stopped = true));
  await sleep(200);
  expect(stopped).toBe(false);
  release();
  await stopping;
  expect(await unsent(id)).toBe(0);
});

it('the reaper hands back an expired lease and publishes it in the same pass; an exhausted one is abandoned, its money released', async () => {
  const crashed = await submit();
  const exhausted = await submit(500);
  await db('executions')
    .whereIn('id', [crashed, exhausted])
    .update({ status: 'running', started_at: db.fn.now(), lease_owner: 'wrk_gone', lease_expires_at: db.raw("now() - interval '1 second'") });
  await db('executions')
    .where({ id: exhausted })
    .update({ attempts: MAX_ATTEMPTS - 1 });
  // every row so far counts as sent: what this pass publishes is the reaper's doing
  await db('outbox').whereNull('published_at').update({ published_at: db.fn.now() });
  const { relay, metrics, events } = relayWith({ graceMs: 60_000 });

  const pass = await relay.tick();
  expect(pass.reaped).toBe(1);
  expect(pass.published).toBe(1); // no grace for a reaped execution's message
  expect(await db('executions').where({ id: crashed }).first()).toMatchObject({ status: 'running', lease_owner: null, attempts: 1 });
  expect(await db('executions').where({ id: exhausted }).first()).toMatchObject({ status: 'failed', error_code: 'delivery_limit_exceeded' });
  expect((await metrics.leaseExpiries.get()).values[0]?.value).toBe(1);
  expect(events('relay.lease.expired')).toEqual([expect.objectContaining({ count: 1, executionIds: [crashed] })]);
  expect(events('relay.execution.abandoned')).toEqual([expect.objectContaining({ executionId: exhausted, reason: 'attempts_exhausted' })]);
  const message = await adminCh.get(names.queueFor('test'), { noAck: true });
  expect(message && JSON.parse(message.content.toString())).toMatchObject({ executionId: crashed });
  await relay.stop();
});

it('the janitor runs on its own interval from start(), deletes expired objects, keeps a row whose delete failed, and stops with the relay', async () => {
  const upload = (n: number) =>
    recordUpload(db, {
      projectId: project.projectId,
      sha256: `${n}`.padStart(64, 'a'),
      format: 'png',
      mimeType: 'image/png',
      sizeBytes: 1,
      storageKey: `projects/x/uploads/${n}`,
      retentionMs: 60_000,
    });
  const gone = (await upload(1)).file;
  const stuck = (await upload(2)).file;
  const later = (await upload(3)).file;
  await db('files')
    .whereIn('id', [gone.id, stuck.id])
    .update({ expires_at: db.raw("now() - interval '1 second'") });
  const deleted: string[] = [];
  const { relay, events } = relayWith({
    janitorIntervalMs: 100,
    deleteObject: async (key) => {
      if (key === stuck.storageKey) throw new Error('S3 unavailable');
      deleted.push(key);
    },
  });
  relay.start();
  try {
    await until('a janitor pass', () => events('relay.janitor.delete_failed').length > 0 && deleted.length > 0);
  } finally {
    await relay.stop();
  }
  expect(deleted).toEqual([gone.storageKey]);
  expect((await db('files').where({ id: gone.id }).first()).deleted_at).not.toBeNull();
  expect((await db('files').where({ id: stuck.id }).first()).deleted_at).toBeNull();
  expect(events('relay.janitor.delete_failed')[0]).toMatchObject({ table: 'files', failed: 1 });

  // stopped: another expired file stays put
  await db('files')
    .where({ id: later.id })
    .update({ expires_at: db.raw("now() - interval '1 second'") });
  const failedPasses = events('relay.janitor.delete_failed').length;
  await sleep(400);
  expect(deleted).toEqual([gone.storageKey]);
  expect(events('relay.janitor.delete_failed')).toHaveLength(failedPasses);
  expect((await db('files').where({ id: later.id }).first()).deleted_at).toBeNull();
});

it("stop() ends the janitor's pass at once, however long its backlog: the deletes in flight are aborted and their rows let go", async () => {
  const keys: string[] = [];
  for (let n = 10; n < 14; n++) {
    const { file } = await recordUpload(db, {
      projectId: project.projectId,
      sha256: `${n}`.padStart(64, 'b'),
      format: 'png',
      mimeType: 'image/png',
      sizeBytes: 1,
      storageKey: `projects/x/uploads/backlog-${n}`,
      retentionMs: 60_000,
    });
    keys.push(file.id);
  }
  await db('files')
    .whereIn('id', keys)
    .update({ expires_at: db.raw("now() - interval '1 second'") });
  let inFlight = 0;
  // a store that answers only when the delete is aborted (its own 30 s bound is far off)
  const { relay, events } = relayWith({
    janitorIntervalMs: 50,
    janitorDeleteTimeoutMs: 30_000,
    deleteObject: (_key, signal) =>
      new Promise<void>((_, reject) => {
        inFlight++;
        if (signal.aborted) reject(new Error('aborted'));
        signal.addEventListener('abort', () => reject(new Error('aborted')), { once: true });
      }),
  });
  relay.start();
  await until('a delete in flight', () => inFlight > 0);
  const started = Date.now();
  await relay.stop();
  expect(Date.now() - started).toBeLessThan(5_000); // the deletes' own bound is 30 s
  const rows = await db('files').whereIn('id', keys).select('deleted_at', 'delete_claim');
  expect(rows.every((r) => r.deleted_at === null && r.delete_claim === null)).toBe(true);
  expect(events('relay.janitor.delete_failed')).toEqual([]); // a stop is not a failing store
  await db('files').whereIn('id', keys).update({ deleted_at: db.fn.now() });
});

it("stop() ends an outbox backlog's drain after the batch under way; the rest waits, unsent, for the next relay", async () => {
  await db('outbox').whereNull('published_at').update({ published_at: db.fn.now() });
  const ids = await Promise.all(Array.from({ length: 8 }, () => submit()));
  let stop: Promise<void> | undefined;
  // batches of 2; the first publish asks the relay to stop
  const { relay, published } = relayWith({
    batchSize: 2,
    publisher: {
      publish: (rk, payload, options) => {
        stop ??= relay.stop();
        published.push(options.messageId);
        return publisher.publish(rk, payload, options);
      },
    },
  });
  relay.start();
  await until('the stop to be asked', () => stop !== undefined);
  await stop;
  const left = (await Promise.all(ids.map(unsent))).reduce((a, b) => a + b, 0);
  expect(published.length).toBeLessThanOrEqual(2);
  expect(left).toBe(ids.length - published.length);
});
