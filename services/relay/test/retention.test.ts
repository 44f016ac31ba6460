import type { Knex } from 'knex';
import {
  addRateLimitPoints,
  auditLedger,
  claimDueDeliveries,
  countRequests,
  createDb,
  deleteRetentionBatch,
  deleteWebhookEndpoint,
  markOutboxPublished,
  publishPrices,
  RETAINED_TABLES,
  recordDeliveryAttempt,
  retentionBatchSql,
  sweepOutbox,
  type RetainedTable,
} from '@tes/db';
import { createLogger, createMetrics, createNullLogger } from '@tes/observability';
import { CaptureTransport, createTestDatabase, seedProject, type TestDatabase } from '@tes/testing';
import { Retention } from '../src/retention';
import { DEFAULT_HORIZONS, insertDeliveries, insertOutbox, seedExecutionWithEndpoint, submit } from './retention-fixtures';

/**
 * The relay's retention (issue #24): each operational table loses exactly its rows past their
 * horizon, a small batch per statement read from an index, and a batch holds no lock any writer
 * of the service waits for.
 */
let database: TestDatabase;
let db: Knex;

beforeAll(async () => {
  database = await createTestDatabase();
  db = createDb({ url: database.url, poolMax: 4 });
});
afterAll(async () => {
  if (db) expect((await auditLedger(db)).problems).toEqual([]);
  await db?.destroy();
  await database?.drop();
});

const retention = (batchSize: number, maxBatchesPerPass?: number) =>
  new Retention({
    db,
    logger: createNullLogger(),
    metrics: createMetrics('relay', false),
    horizons: DEFAULT_HORIZONS,
    intervalMs: 60_000,
    batchSize,
    maxBatchesPerPass,
  });

/** Each test starts from empty operational tables (the file shares one database). */
beforeEach(async () => {
  await db.raw('TRUNCATE outbox, webhook_deliveries, rate_limits, usage_counters');
});

const countOf = async (table: string, where = 'true'): Promise<number> =>
  (await db.raw<{ rows: { n: number }[] }>(`SELECT count(*)::int AS n FROM ${table} WHERE ${where}`)).rows[0]!.n;

it('deletes only what is past its horizon: published outbox rows, ended deliveries, ended windows, old months', async () => {
  const at = await seedExecutionWithEndpoint(db);
  const DAY = 86_400;
  const oldPublished = await insertOutbox(db, at, 5, 2 * DAY);
  const unsentOld = await insertOutbox(db, at, 1, null);
  await db('outbox')
    .whereIn('id', unsentOld)
    .update({ created_at: db.raw("now() - interval '30 days'") });
  const recentPublished = await insertOutbox(db, at, 2, 3_600);

  const oldDelivered = await insertDeliveries(db, at, 3, 'delivered', 8 * DAY);
  const oldFailed = await insertDeliveries(db, at, 2, 'failed', 8 * DAY);
  const oldPending = await insertDeliveries(db, at, 1, 'pending', 8 * DAY); // a pending row is never deleted, however old
  const recentDelivered = await insertDeliveries(db, at, 2, 'delivered', 6 * DAY);

  const now = Date.now();
  await db('rate_limits').insert([
    { key: 'ret:old-1', points: 1, expire: now - 2 * 3_600_000 },
    { key: 'ret:old-2', points: 1, expire: now - 61 * 60_000 },
    { key: 'ret:recent', points: 1, expire: now - 59 * 60_000 },
    { key: 'ret:live', points: 1, expire: now + 60_000 },
  ]);

  // months: the current one and 12 before it stay (USAGE_RETENTION_MONTHS=13); 13 and 30 months back go
  const monthsBack = [0, 1, 12, 13, 30];
  await db.raw(
    `INSERT INTO usage_counters (project_id, month, request_count)
     SELECT :projectId, (tes_month() - make_interval(months => m))::date, m + 1 FROM unnest(:months::int[]) AS m`,
    { projectId: at.projectId, months: monthsBack },
  );

  // batches of 2 and a pass limit of 2 batches per table: a pass deletes at most 4 rows of each
  const limited = await retention(2, 2).pass();
  expect(limited).toEqual({ outbox: 4, webhook_deliveries: 4, rate_limits: 2, usage_counters: 2 });
  expect(await retention(2).pass()).toEqual({ outbox: 1, webhook_deliveries: 1, rate_limits: 0, usage_counters: 0 });
  expect(await retention(2).pass()).toEqual({ outbox: 0, webhook_deliveries: 0, rate_limits: 0, usage_counters: 0 });

  expect(await db('outbox').whereIn('id', oldPublished).count('* as n')).toEqual([{ n: 0 }]);
  expect(
    (
      await db('outbox')
        .whereIn('id', [...unsentOld, ...recentPublished])
        .select('id')
    )
      .map((r) => Number(r.id))
      .sort(),
  ).toEqual([...unsentOld, ...recentPublished].sort());
  const deliveries = (await db('webhook_deliveries').select('id')).map((r) => r.id as string).sort();
  expect(deliveries).toEqual([...oldPending, ...recentDelivered].sort());
  expect([...oldDelivered, ...oldFailed].filter((id) => deliveries.includes(id))).toEqual([]);
  expect((await db('rate_limits').select('key').orderBy('key')).map((r) => r.key)).toEqual(['ret:live', 'ret:recent']);
  const kept = await db.raw<{ rows: { back: number }[] }>(
    `SELECT (extract(year FROM age(tes_month(), month)) * 12 + extract(month FROM age(tes_month(), month)))::int AS back
       FROM usage_counters WHERE project_id = :projectId ORDER BY month DESC`,
    { projectId: at.projectId },
  );
  expect(kept.rows.map((r) => r.back)).toEqual([0, 1, 12]);
});

it('refuses a usage horizon that would delete the current or the previous month', async () => {
  await expect(deleteRetentionBatch(db, 'usage_counters', { ...DEFAULT_HORIZONS, usageMonths: 1 }, 10)).rejects.toThrow(/usageMonths/);
});

it("counts what it deleted per table, and a table that fails is logged while the others' passes still run", async () => {
  const at = await seedExecutionWithEndpoint(db);
  await insertOutbox(db, at, 3, 2 * 86_400);
  await insertDeliveries(db, at, 2, 'failed', 8 * 86_400);
  const logs = new CaptureTransport();
  const metrics = createMetrics('relay', false);
  // usageMonths 1 is refused (config refuses it too): usage_counters fails, the other tables do not
  const broken = new Retention({
    db,
    logger: createLogger({ service: 'test', transports: [logs] }),
    metrics,
    horizons: { ...DEFAULT_HORIZONS, usageMonths: 1 },
    intervalMs: 60_000,
    batchSize: 100,
  });
  expect(await broken.pass()).toEqual({ outbox: 3, webhook_deliveries: 2, rate_limits: 0, usage_counters: 0 });
  const counted = (await metrics.registry.getSingleMetric('tes_retention_deleted_rows_total')!.get()).values.map((v) => [v.labels.table, v.value]);
  expect(counted.sort()).toEqual([
    ['outbox', 3],
    ['webhook_deliveries', 2],
  ]);
  const events = logs.records.map((r) => [r.message, r.table ?? null]);
  expect(events).toEqual([
    ['relay.retention.failed', 'usage_counters'],
    ['relay.retention.deleted', null],
  ]);
});

/** EXPLAIN (ANALYZE, BUFFERS) of one batch, in a transaction rolled back afterwards. */
async function explainBatch(table: RetainedTable): Promise<{ plan: string; buffers: number }> {
  const bindings = { horizon: table === 'usage_counters' ? DEFAULT_HORIZONS.usageMonths : 3_600_000, limit: 500 };
  const trx = await db.transaction();
  try {
    const res = await trx.raw<{ rows: { 'QUERY PLAN': string }[] }>(`EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, TIMING OFF) ${retentionBatchSql(table)}`, bindings);
    const plan = res.rows.map((r) => r['QUERY PLAN']).join('\n');
    // the first Buffers line is the top node's: everything the statement read, its children included
    const top = /Buffers: shared(?: hit=(\d+))?(?: read=(\d+))?/.exec(plan);
    return { plan, buffers: Number(top?.[1] ?? 0) + Number(top?.[2] ?? 0) };
  } finally {
    await trx.rollback();
  }
}

it('a batch reads its index, not the table: with 20,000 rows inside the horizon it touches a handful of pages', async () => {
  const at = await seedExecutionWithEndpoint(db);
  // rows the service still needs, by the tens of thousands: unsent and recently published
  // outbox rows, pending and recent deliveries, live windows, this month's counters
  await insertOutbox(db, at, 10_000, null);
  await insertOutbox(db, at, 10_000, 60);
  await insertDeliveries(db, at, 10_000, 'pending', 30 * 86_400);
  await insertDeliveries(db, at, 10_000, 'delivered', 60);
  await db.raw(
    `INSERT INTO rate_limits (key, points, expire) SELECT 'load:' || i, 1, (extract(epoch FROM now()) * 1000)::bigint + 60000 FROM generate_series(1, 20000) i`,
  );
  await db.raw(`INSERT INTO organizations (id, name) VALUES ('org_retention_plan', 'plan')`);
  await db.raw(
    `INSERT INTO projects (id, organization_id, name) SELECT 'prj_plan_' || i, 'org_retention_plan', 'p' FROM generate_series(1, 2000) i;
     INSERT INTO usage_counters (project_id, month, request_count)
     SELECT 'prj_plan_' || i, (tes_month() - make_interval(months => m))::date, 1 FROM generate_series(1, 2000) i, generate_series(0, 9) m`,
  );
  await db.raw('ANALYZE outbox, webhook_deliveries, rate_limits, usage_counters');
  const index: Record<RetainedTable, string> = {
    outbox: 'outbox_published_idx',
    webhook_deliveries: 'webhook_deliveries_finished_idx',
    rate_limits: 'rate_limits_expire_idx',
    usage_counters: 'usage_counters_month_idx',
  };
  for (const table of RETAINED_TABLES) {
    const { plan, buffers } = await explainBatch(table);
    expect({ table, usesIndex: plan.includes(index[table]), seqScan: plan.includes('Seq Scan on') }).toEqual({ table, usesIndex: true, seqScan: false });
    // a sequential scan of 20,000 rows reads well over 100 pages
    expect(buffers < 20 ? 'few pages' : `${table}: ${buffers} pages\n${plan}`).toBe('few pages');
  }
});

it("a batch's locks block no writer of the service: submit, publish, sweep, deliveries, windows and usage all proceed while it is open", async () => {
  const p = await seedProject(db, { creditMicros: 1_000_000 });
  const { priceVersion } = await publishPrices(db, { retention: 1 });
  const at = await seedExecutionWithEndpoint(db);
  await insertOutbox(db, at, 50, 2 * 86_400);
  await insertDeliveries(db, at, 50, 'delivered', 8 * 86_400);
  await insertDeliveries(db, at, 20, 'failed', 8 * 86_400);
  const pending = await insertDeliveries(db, at, 3, 'pending', 8 * 86_400);
  await db('rate_limits').insert({ key: 'lock:stale', points: 1, expire: Date.now() - 2 * 3_600_000 });
  // an old month (retention's) and this month's counter (the gateways' and the settlements')
  await db.raw(`INSERT INTO usage_counters (project_id, month) VALUES (:p, (tes_month() - interval '20 months')::date), (:p, tes_month())`, {
    p: p.projectId,
  });
  await insertOutbox(db, at, 2, null);
  const unsent = (await db('outbox').whereNull('published_at').select('id')).map((r) => Number(r.id)); // these two and the submit's
  expect(unsent).toHaveLength(3);

  // every writer runs with lock_timeout: one that waits for a lock fails with 55P03 instead of hanging
  const writers = createDb({
    url: `${database.url}?options=${encodeURIComponent('-c lock_timeout=3000')}`,
    poolMax: 2,
    applicationName: 'tes-retention-writer',
  });
  expect((await writers.raw<{ rows: { lock_timeout: string }[] }>('SHOW lock_timeout')).rows[0]!.lock_timeout).toBe('3s');
  const held = await db.transaction();
  try {
    const deleted: Record<string, number> = {};
    for (const table of RETAINED_TABLES) deleted[table] = await deleteRetentionBatch(held, table, DEFAULT_HORIZONS, 1_000);
    expect(deleted).toEqual({ outbox: 50, webhook_deliveries: 70, rate_limits: 1, usage_counters: 1 });

    const executionId = await submit(writers, p, priceVersion); // an execution and its outbox row
    const [fresh] = await writers('outbox').where({ execution_id: executionId }).select('id');
    await markOutboxPublished(writers, [Number(fresh!.id)]); // the gateway's dispatcher
    // the relay's sweep claims the unsent rows (SKIP LOCKED would hide a row the batch held; it must find all three)
    const swept: number[] = [];
    await sweepOutbox(writers, { graceMs: 0, limit: 10 }, async (entries) => {
      swept.push(...entries.map((e) => e.id));
      return { published: entries.map((e) => e.id), failed: [] };
    });
    expect(swept.sort()).toEqual([...unsent].sort());
    const claimed = await claimDueDeliveries(writers, { limit: 10, perProject: 10, perOrganization: 10, leaseMs: 60_000 });
    expect(claimed.map((c) => c.id).sort()).toEqual([...pending].sort());
    await recordDeliveryAttempt(writers, pending[0]!, { attempt: 1, delivered: true, statusCode: 200, error: null, retryInMs: null });
    await insertDeliveries(writers, at, 1, 'pending', 0); // what the terminal-state trigger writes
    await deleteWebhookEndpoint(writers, at.endpointId); // fails the endpoint's pending deliveries
    await addRateLimitPoints(writers, { key: 'lock:live', points: 1, windowMs: 60_000 });
    await countRequests(writers, new Map([[p.projectId, 3]])); // this month's usage
  } finally {
    await held.commit();
    await writers.destroy();
  }
  expect(await countOf('outbox', `published_at < now() - interval '1 day'`)).toBe(0);
});

it('a gateway that restarts a window while a batch deletes it gets a fresh window, whichever of the two comes first', async () => {
  await db('rate_limits').insert({ key: 'race:stale', points: 7, expire: Date.now() - 2 * 3_600_000 });
  const held = await db.transaction();
  let upserted = false;
  const upsert = addRateLimitPoints(db, { key: 'race:stale', points: 1, windowMs: 60_000 }).then((r) => {
    upserted = true;
    return r;
  });
  try {
    // the upsert may reach the row before the batch (then the batch skips or re-checks it) or after
    expect(await deleteRetentionBatch(held, 'rate_limits', DEFAULT_HORIZONS, 10)).toBeLessThanOrEqual(1);
  } finally {
    await held.commit();
  }
  const r = await upsert;
  expect(upserted).toBe(true);
  expect(r.counted).toBe(1); // a new window: the stale count (7) is gone either way
  expect(await countOf('rate_limits', `key = 'race:stale'`)).toBe(1);
});
