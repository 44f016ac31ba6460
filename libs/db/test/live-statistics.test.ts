import type { Knex } from 'knex';
import { createDb, liveStatisticsStale, refreshLiveStatistics } from '@tes/db';
import { createTestDatabase, seedHistory, type TestDatabase } from '@tes/testing';

/**
 * Issue #24: the planner's count of live executions follows the real one. Analyzed while
 * nothing was queued, the partial indexes of the live states count as empty whatever they hold
 * since; the relay's gauges know the real count and refresh the statistics when the two differ
 * tenfold above a thousand.
 */
let database: TestDatabase;
let db: Knex;

beforeAll(async () => {
  database = await createTestDatabase();
  db = createDb({ url: database.url, poolMax: 2 });
  await seedHistory(db, { executions: 2_000, projects: 10 });
  await db.raw('ANALYZE executions');
}, 60_000);

afterAll(async () => {
  await db?.destroy();
  await database?.drop();
});

const planned = async (): Promise<number> =>
  (await db.raw<{ rows: { n: number }[] }>(`SELECT reltuples::float8 AS n FROM pg_class WHERE oid = 'executions_lease_idx'::regclass`)).rows[0]!.n;

test('when the line grows far past what the planner counts, the table is analyzed once, and not again while they agree', async () => {
  expect(await planned()).toBeLessThan(10);
  // a backlog queued after the last ANALYZE
  await db.raw(
    `INSERT INTO executions (id, project_id, api_key_id, tool, model, category, status, arguments, price_version,
       total_steps, reserved_micros, idempotency_key, request_digest, lease_expires_at, created_at)
     SELECT 'exe_9' || lpad(i::text, 25, '0'), p.id, k.id, 'test.sleep', 'sleep', 'test', 'queued', '{}'::jsonb, 'v',
            1, 1000, 'backlog-' || i, 'd', now() + interval '1 hour', now()
       FROM generate_series(1, 3000) AS i
       CROSS JOIN LATERAL (SELECT id FROM projects ORDER BY id LIMIT 1) p
       CROSS JOIN LATERAL (SELECT id FROM api_keys WHERE project_id = p.id LIMIT 1) k`,
  );
  expect(await planned()).toBeLessThan(10); // nothing told the planner
  const first = await refreshLiveStatistics(db, 3_000);
  expect(first).toEqual({ estimated: expect.any(Number), analyzed: true });
  expect(first.estimated).toBeLessThan(10);
  expect(await planned()).toBeGreaterThan(2_000);
  expect((await refreshLiveStatistics(db, 3_000)).analyzed).toBe(false);
});

test('the threshold: tenfold apart and above a thousand, either way', () => {
  expect(liveStatisticsStale(999, 0)).toBe(false);
  expect(liveStatisticsStale(1_000, 0)).toBe(true);
  expect(liveStatisticsStale(5_000, 600)).toBe(false);
  expect(liveStatisticsStale(5_000, 400)).toBe(true);
  expect(liveStatisticsStale(0, 1_000)).toBe(true);
  expect(liveStatisticsStale(200, 1_900)).toBe(false);
});
