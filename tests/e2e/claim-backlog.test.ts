/**
 * Issue #24: the fair claim (claimNextFair) behind a queued backlog its statistics have not
 * seen. A database analyzed while nothing was queued (after a history was loaded, after a quiet
 * night, or wherever autovacuum lags) estimates `status = 'queued'` at about one row; then 3,000
 * executions queue up. The claim's generic plan (what its named prepared statement runs after
 * five calls) must still read only what the pick needs: a few index entries per project with
 * queued work and the picked row. It read the whole backlog, and ran the pick once per row of
 * it, when the picked row was joined rather than looked up by its id.
 */
import type { Knex } from 'knex';
import pg from 'pg';
import {
  cancelExecution,
  claimNextFair,
  createDb,
  getExecution,
  enterWaiting,
  finishLastStepAndSettle,
  markNeedsReview,
  releaseLease,
  renewLease,
  resumeExecution,
  settleExecution,
  startStep,
} from '@tes/db';
import { createTestDatabase, seedHistory, type TestDatabase } from '@tes/testing';
import { captureStatements, explain, plansToJudge, scansOf, type CapturedStatement } from '../plans';

const QUEUED = 3_000;
const QUEUED_PROJECTS = 30;
/** What one claim may read of executions: ≈ 3 index entries per project with queued work, and the picked row. */
const MAX_ROWS = 300;
/** Projects with nothing queued or running; and what one claim may read of projects (one probe per running execution and per project with queued work). */
const IDLE_PROJECTS = 3_000;
const MAX_PROJECT_ROWS = 200;
/** Executions of another category running meanwhile (more than MAX_ROWS). */
const RUNNING_ELSEWHERE = 2 * MAX_ROWS;

let database: TestDatabase;
let db: Knex;

beforeAll(async () => {
  database = await createTestDatabase();
  db = createDb({ url: database.url, poolMax: 1, applicationName: 'tes-claim-test' });
  await seedHistory(db, { executions: 5_000, projects: QUEUED_PROJECTS });
  // tenants with no work now: a claim reads the projects it needs by id, never all of them
  await db.raw(`INSERT INTO organizations (id, name) SELECT 'org_idle' || i, 'idle' FROM generate_series(1, ${IDLE_PROJECTS}) AS i`);
  await db.raw(
    `INSERT INTO projects (id, organization_id, name) SELECT 'prj_idle' || i, 'org_idle' || i, 'idle' FROM generate_series(1, ${IDLE_PROJECTS}) AS i`,
  );
  await db.raw('ANALYZE');
  // the backlog arrives after the statistics were taken
  await db.raw(
    `INSERT INTO executions (id, project_id, api_key_id, tool, model, category, status, arguments, price_version,
       total_steps, reserved_micros, idempotency_key, request_digest, lease_expires_at, created_at)
     SELECT 'exe_9' || lpad(i::text, 25, '0'), p.id, k.id, 'test.sleep', 'sleep', 'test', 'queued', '{}'::jsonb, 'v',
            1, 1000, 'backlog-' || i, 'd', now() + interval '1 hour', now() - (${QUEUED} - i) * interval '1 ms'
       FROM generate_series(1, ${QUEUED}) AS i
       JOIN LATERAL (SELECT id FROM projects ORDER BY id OFFSET (i % ${QUEUED_PROJECTS}) LIMIT 1) p ON true
       JOIN LATERAL (SELECT id FROM api_keys WHERE project_id = p.id LIMIT 1) k ON true`,
  );
  // and another category's work running on the fleet (an image render per slot of a large
  // fleet), also unseen by the statistics: a worker's statement by id on its own execution must
  // not read the other executions running beside it
  await db.raw(
    `INSERT INTO executions (id, project_id, api_key_id, tool, model, category, status, arguments, price_version,
       total_steps, reserved_micros, idempotency_key, request_digest, lease_owner, lease_expires_at, started_at, claims, created_at)
     SELECT 'exe_8' || lpad(i::text, 25, '0'), p.id, k.id, 'image.render', 'card', 'image', 'running', '{}'::jsonb, 'v',
            1, 1000, 'running-' || i, 'd', 'elsewhere:1', now() + interval '1 hour', now(), 1, now() - interval '1 minute'
       FROM generate_series(1, ${RUNNING_ELSEWHERE}) AS i
       JOIN LATERAL (SELECT id FROM projects ORDER BY id OFFSET (i % ${QUEUED_PROJECTS}) LIMIT 1) p ON true
       JOIN LATERAL (SELECT id FROM api_keys WHERE project_id = p.id LIMIT 1) k ON true`,
  );
  // their reservations, so that settling them keeps each balance whole
  await db.raw(
    `UPDATE projects p SET reserved_micros = reserved_micros + q.n * 1000, available_micros = available_micros - q.n * 1000
       FROM (SELECT project_id, count(*) AS n FROM executions WHERE status IN ('queued', 'running') GROUP BY project_id) q WHERE q.project_id = p.id`,
  );
}, 120_000);

afterAll(async () => {
  await db?.destroy();
  await database?.drop();
});

test('the fair claim, and the worker statements by id, read what they need, not the backlog, in every plan', async () => {
  // the newest queued ones, chosen before the capture: none of them is claimed below
  const newest = await db.raw<{ rows: { id: string; project_id: string }[] }>(
    `SELECT id, project_id FROM executions WHERE status = 'queued' ORDER BY created_at DESC LIMIT 6`,
  );
  const capture = captureStatements(database.name, (app) => app === 'tes-claim-test');
  const claimed: { id: string; projectId: string; lease: string }[] = [];
  let statements: CapturedStatement[];
  try {
    for (let i = 0; i < 8; i++) {
      const c = await claimNextFair(db, { category: 'test', owner: 'w1', leaseTtlMs: 60_000, share: 1, ownSlots: 100 });
      if (c) claimed.push({ id: c.id, projectId: c.projectId, lease: c.lease });
    }
    expect(claimed).toHaveLength(8);
    // what a worker then does with what it claimed, each statement six times or more (named
    // statements switch to their generic plan after five runs)
    for (const c of claimed) {
      expect(await renewLease(db, c.id, c.lease, 60_000)).not.toBeNull();
      expect(await startStep(db, { executionId: c.id, projectId: c.projectId, index: 0, name: 'sleep', owner: c.lease })).toBe('started');
    }
    const [a, b, d, e, ...rest] = claimed;
    expect(await releaseLease(db, a!.id, a!.lease, 60_000)).toBe(true);
    expect(await resumeExecution(db, a!.id, 'w2', 60_000)).not.toBeNull();
    expect(await enterWaiting(db, { executionId: b!.id, owner: b!.lease, recheckDeadlineMs: 60_000 })).toBe(true);
    expect(await markNeedsReview(db, { executionId: d!.id, owner: d!.lease, errorCode: 'provider_timeout', errorMessage: 'x' })).toBe(true);
    expect(
      await settleExecution(db, { executionId: e!.id, projectId: e!.projectId, status: 'failed', chargedMicros: 0, from: ['running'], leaseOwner: e!.lease }),
    ).not.toBeNull();
    for (const c of rest) {
      const settled = await finishLastStepAndSettle(
        db,
        { executionId: c.id, projectId: c.projectId, index: 0, owner: c.lease, status: 'succeeded', costMicros: 100 },
        { executionId: c.id, projectId: c.projectId, status: 'succeeded', chargedMicros: 100, from: ['running'], leaseOwner: c.lease },
      );
      expect(settled).not.toBeNull();
    }
    // a caller cancels queued work (settled at once)
    for (const q of newest.rows) {
      const record = await getExecution(db, q.project_id, q.id);
      expect((await cancelExecution(db, q.project_id, record!)).kind).toBe('cancelled');
    }
  } finally {
    statements = capture.stop();
  }
  expect(statements.map((s) => s.name)).toEqual(expect.arrayContaining(['tes_claim_fair', 'tes_renew_lease', 'tes_start_step']));
  const client = new pg.Client({ connectionString: database.url });
  await client.connect();
  const offenders: string[] = [];
  try {
    for (const st of statements) {
      const plans = await explain(client, st);
      if (st.name === 'tes_claim_fair')
        // EXPLAIN shows the claim as a Function Scan: its pick is judged in the function's own plans
        for (const nested of [plans.nestedAnalyzed, plans.nestedAnalyzedGeneric]) expect(nested.map((n) => n.query).join('\n')).toContain('UPDATE executions');
      for (const [kind, plan] of plansToJudge(plans)) {
        for (const [relation, max] of [
          ['executions', MAX_ROWS],
          ['projects', MAX_PROJECT_ROWS],
        ] as const) {
          const read = scansOf(plan)
            .filter((f) => f.relation === relation)
            .reduce((n, f) => n + f.rows, 0);
          if (read > max) offenders.push(`${kind}: ${read} rows of ${relation}: [${st.name ?? ''}] ${st.text.replace(/\s+/g, ' ').slice(0, 160)}`);
        }
      }
    }
  } finally {
    await client.end();
  }
  expect(offenders).toEqual([]);
}, 120_000);
