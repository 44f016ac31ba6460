import { setTimeout as sleep } from 'node:timers/promises';
import type { Knex } from 'knex';
import { addRateLimitPoints, auditLedger, createDb, markOutboxPublished, recordDeliveryAttempt, type RetentionHorizons } from '@tes/db';
import { createMetrics, createNullLogger } from '@tes/observability';
import { createTestDatabase, type TestDatabase } from '@tes/testing';
import { Retention } from '../src/retention';
import { insertDeliveries, insertOutbox, seedExecutionWithEndpoint } from './retention-fixtures';

/**
 * Retention under a steady load (issue #24, "the tables stop growing"): a writer publishes
 * outbox rows, delivers webhooks and opens rate-limit windows at a steady rate while the relay's
 * Retention loop runs with one-second horizons. Each table's row count stays within what was
 * written over the last few seconds (it plateaus) while the total written keeps growing, and the
 * writer's connections are never seen waiting for a lock.
 */
const RUN_MS = 12_000;
/** Rows present at any moment were written within this window: horizon 1 s + interval 0.2 s + a loaded machine's slack. */
const WINDOW_MS = 4_000;
const HORIZONS: RetentionHorizons = { outboxMs: 1_000, webhookDeliveriesMs: 1_000, rateLimitsMs: 1_000, usageMonths: 13 };
const TABLES = ['outbox', 'webhook_deliveries', 'rate_limits'] as const;
type Table = (typeof TABLES)[number];

let database: TestDatabase;
let db: Knex;
let writers: Knex;

beforeAll(async () => {
  database = await createTestDatabase();
  db = createDb({ url: database.url, poolMax: 3 });
  writers = createDb({ url: database.url, poolMax: 2, applicationName: 'tes-retention-writer' });
});
afterAll(async () => {
  if (db) expect((await auditLedger(db)).problems).toEqual([]);
  await writers?.destroy();
  await db?.destroy();
  await database?.drop();
});

it('under a steady write load the outbox, the deliveries and the windows plateau, and no writer waits for a lock', async () => {
  const at = await seedExecutionWithEndpoint(db);
  await markOutboxPublished(
    db,
    (await db('outbox').select('id')).map((r) => Number(r.id)),
  );
  const retention = new Retention({
    db,
    logger: createNullLogger(),
    metrics: createMetrics('relay', false),
    horizons: HORIZONS,
    intervalMs: 200,
    batchSize: 50,
  });

  const written: Record<Table, number[]> = { outbox: [], webhook_deliveries: [], rate_limits: [] }; // when each row was written
  const samples: { at: number; counts: Record<Table, number> }[] = [];
  let lockWaits = 0;
  let lockSamples = 0;
  let slowestTickMs = 0;
  const started = Date.now();
  const end = started + RUN_MS;

  // the writer: every 25 ms two outbox rows written and published, a delivery written and
  // delivered, a new key's window opened (ending 200 ms later)
  const writer = (async () => {
    for (let i = 0; Date.now() < end; i++) {
      const tickAt = Date.now();
      const ids = await insertOutbox(writers, at, 2, null);
      await markOutboxPublished(writers, ids);
      const [delivery] = await insertDeliveries(writers, at, 1, 'pending', 0);
      await recordDeliveryAttempt(writers, delivery!, { attempt: 0, delivered: true, statusCode: 200, error: null, retryInMs: null });
      await addRateLimitPoints(writers, { key: `load:${i}`, points: 1, windowMs: 200 });
      // a row counts as written when its tick began: never later than it was
      written.outbox.push(tickAt, tickAt);
      written.webhook_deliveries.push(tickAt);
      written.rate_limits.push(tickAt);
      slowestTickMs = Math.max(slowestTickMs, Date.now() - tickAt);
      await sleep(Math.max(0, tickAt + 25 - Date.now()));
    }
  })();
  const sampler = (async () => {
    while (Date.now() < end) {
      const res = await db.raw<{ rows: { outbox: number; webhook_deliveries: number; rate_limits: number }[] }>(
        `SELECT (SELECT count(*) FROM outbox)::int AS outbox, (SELECT count(*) FROM webhook_deliveries)::int AS webhook_deliveries,
                (SELECT count(*) FROM rate_limits)::int AS rate_limits`,
      );
      samples.push({ at: Date.now(), counts: res.rows[0]! });
      await sleep(250);
    }
  })();
  // pg_stat_activity: is any of the writer's connections waiting for a lock right now?
  const lockWatch = (async () => {
    while (Date.now() < end) {
      const res = await db.raw<{ rows: { n: number }[] }>(
        `SELECT count(*)::int AS n FROM pg_stat_activity
          WHERE datname = current_database() AND application_name = 'tes-retention-writer' AND wait_event_type = 'Lock'`,
      );
      lockWaits += res.rows[0]!.n;
      lockSamples += 1;
      await sleep(20);
    }
  })();
  retention.start();
  try {
    await Promise.all([writer, sampler, lockWatch]);
  } finally {
    await retention.stop();
  }

  const total = Object.fromEntries(TABLES.map((t) => [t, written[t].length])) as Record<Table, number>;
  const steady = samples.filter((s) => s.at >= started + WINDOW_MS + 2_000);
  expect(steady.length).toBeGreaterThan(5);
  for (const table of TABLES) {
    // what a table may hold at a sample: the rows written in the window before it
    const over = steady
      .map((s) => ({ at: s.at - started, count: s.counts[table], bound: written[table].filter((w) => w > s.at - WINDOW_MS && w <= s.at).length }))
      .filter((s) => s.count > s.bound);
    expect({ table, over }).toEqual({ table, over: [] });
    // and that bound is far below what was written in all: without retention the test fails
    const peak = Math.max(...steady.map((s) => s.counts[table]));
    expect({ table, peak, total: total[table], plateau: peak * 2 < total[table] }).toEqual({ table, peak, total: total[table], plateau: true });
  }
  expect({ lockWaits, lockSamples: lockSamples > 50, slowestTickMs: slowestTickMs < 10_000 }).toEqual({ lockWaits: 0, lockSamples: true, slowestTickMs: true });
}, 60_000);
