import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { newId } from '@tes/core';
import {
  auditLedger,
  claimExecution,
  createWebhookEndpoint,
  deleteWebhookEndpoint,
  finishLastStepAndSettle,
  getExecutionWithSteps,
  listWebhookDeliveries,
  markNeedsReview,
  publicExecution,
  publishPrices,
  settleExecution,
  startStep,
  submitExecution,
} from '@tes/db';
import { createMetrics, createNullLogger } from '@tes/observability';
import { GuardedHttp } from '@tes/outbound';
import { seedProject, useTestDatabase, type SeededProject } from '@tes/testing';
import { WebhookDeliverer } from '../src/webhooks';

/**
 * What a webhook says and where it goes (issue #26): the body describes the state that caused
 * the event, whatever the execution became before the first attempt; a deleted endpoint gets
 * nothing, whether the delivery was written as the endpoint was being deleted or the deletion
 * came after the claim; and a retry is dated by the database's clock, not by the relay's.
 */
const { db } = useTestDatabase({ poolMax: 6 });

interface Received {
  body: string;
}

/** A receiver that answers `statusFor(n)` to its n-th request (from 0). */
async function receiver(statusFor: (n: number) => number = () => 204): Promise<{ url: string; got: Received[]; close: () => Promise<void> }> {
  const got: Received[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const n = got.length;
      got.push({ body: Buffer.concat(chunks).toString('utf8') });
      res.writeHead(statusFor(n)).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}/hooks`, got, close: () => new Promise((r) => server.close(() => r())) };
}

function deliverer(retryDelaysMs: number[] = [50, 50]): WebhookDeliverer {
  return new WebhookDeliverer({
    db,
    http: new GuardedHttp({ allowPrivateNetworks: true }),
    logger: createNullLogger(),
    metrics: createMetrics('relay', false),
    concurrency: 8,
    timeoutMs: 2_000,
    retryDelaysMs,
    pollMs: 20,
  });
}

async function until(what: string, check: () => Promise<boolean> | boolean, ms = 15_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** A submitted execution, claimed by worker 'w' (running); its one claim's lease is LEASE. */
async function running(p: SeededProject): Promise<string> {
  const { priceVersion } = await publishPrices(db, { events: 1 });
  const id = newId('exe');
  await submitExecution(db, {
    id,
    projectId: p.projectId,
    apiKeyId: p.keyId,
    tool: 'test.sleep',
    model: 'sleep',
    category: 'test',
    arguments: { seconds: 0 },
    priceVersion,
    totalSteps: 1,
    reservedMicros: 100,
    idempotencyKey: `k-${id}`,
    requestDigest: 'd',
    dispatchDeadlineMs: 60_000,
  });
  expect((await claimExecution(db, id, 'w', 30_000))?.lease).toBe(LEASE);
  return id;
}

/** The fence of worker 'w''s first claim: every write of the claim's holder carries it. */
const LEASE = 'w:1';

interface Event {
  type: string;
  data: Record<string, unknown>;
}
const events = (got: Received[]): Event[] => got.map((r) => JSON.parse(r.body) as Event);

it('an execution.needs_review sent after an operator resolved the execution still describes the needs_review state', async () => {
  const p = await seedProject(db, { creditMicros: 10_000 });
  const rx = await receiver();
  await createWebhookEndpoint(db, { projectId: p.projectId, url: rx.url });
  const id = await running(p);
  expect(await startStep(db, { executionId: id, projectId: p.projectId, index: 0, name: 'sleep', owner: LEASE, external: true })).toBe('started');
  expect(await markNeedsReview(db, { executionId: id, owner: LEASE, errorCode: 'provider_outcome_unknown', errorMessage: 'no answer' })).toBe(true);
  // resolved by an operator (admin execution resolve) before the relay made its first attempt
  expect(
    await settleExecution(db, {
      executionId: id,
      projectId: p.projectId,
      status: 'succeeded',
      chargedMicros: 60,
      from: ['needs_review'],
      kind: 'resolve',
      output: { ok: 1 },
    }),
  ).not.toBeNull();

  const d = deliverer();
  d.start();
  try {
    await until('both deliveries', async () => (await listWebhookDeliveries(db, id)).every((x) => x.status === 'delivered'));
    const byType = new Map(events(rx.got).map((e) => [e.type, e.data]));
    expect([...byType.keys()].sort()).toEqual(['execution.needs_review', 'execution.succeeded']);
    expect(byType.get('execution.needs_review')).toMatchObject({
      id,
      status: 'needs_review',
      chargedMicros: 0,
      errorCode: 'provider_outcome_unknown',
      errorMessage: 'no answer',
      output: null,
      progress: { completedSteps: 0, totalSteps: 1, currentStep: null },
      steps: [{ index: 0, name: 'sleep', status: 'running', costMicros: 0 }],
    });
    expect(byType.get('execution.succeeded')).toMatchObject({ id, status: 'succeeded', chargedMicros: 60, output: { ok: 1 } });
  } finally {
    await d.stop();
    await rx.close();
  }
});

it('the body of an event whose execution did not change since is the public execution as GET shows it, its last step included', async () => {
  const p = await seedProject(db, { creditMicros: 10_000 });
  const rx = await receiver();
  await createWebhookEndpoint(db, { projectId: p.projectId, url: rx.url, events: ['execution.succeeded'] });
  const id = await running(p);
  expect(await startStep(db, { executionId: id, projectId: p.projectId, index: 0, name: 'sleep', owner: LEASE })).toBe('started');
  // the step's end and the settlement in one statement: the trigger sees the step as that statement left it
  const settled = await finishLastStepAndSettle(
    db,
    { executionId: id, projectId: p.projectId, index: 0, owner: LEASE, status: 'succeeded', costMicros: 30, checkpoint: {} },
    { executionId: id, projectId: p.projectId, status: 'succeeded', chargedMicros: 30, from: ['running'], leaseOwner: LEASE, output: { n: 1 } },
  );
  expect(settled).not.toBeNull();
  const d = deliverer();
  d.start();
  try {
    await until('the delivery', () => rx.got.length === 1);
    const view = (await getExecutionWithSteps(db, p.projectId, id))!;
    const [event] = events(rx.got);
    expect(event!.data).toEqual(publicExecution(view.execution, view.steps));
    expect(event!.data).toMatchObject({ status: 'succeeded', progress: { completedSteps: 1 }, steps: [{ status: 'succeeded', costMicros: 30 }] });
  } finally {
    await d.stop();
    await rx.close();
  }
});

it('a delivery written before snapshots existed gets its body from the execution, as before', async () => {
  const p = await seedProject(db, { creditMicros: 10_000 });
  const rx = await receiver();
  await createWebhookEndpoint(db, { projectId: p.projectId, url: rx.url });
  const id = await running(p);
  await settleExecution(db, {
    executionId: id,
    projectId: p.projectId,
    status: 'succeeded',
    chargedMicros: 20,
    from: ['running'],
    leaseOwner: LEASE,
    output: { old: true },
  });
  await db('webhook_deliveries').where({ execution_id: id }).update({ execution_snapshot: null });
  const d = deliverer();
  d.start();
  try {
    await until('the delivery', () => rx.got.length === 1);
    const view = (await getExecutionWithSteps(db, p.projectId, id))!;
    expect(events(rx.got)[0]!.data).toEqual(publicExecution(view.execution, view.steps));
  } finally {
    await d.stop();
    await rx.close();
  }
});

it('a delivery written while its endpoint was being deleted is closed unsent, not sent signed to the deleted URL', async () => {
  const p = await seedProject(db, { creditMicros: 10_000 });
  const rx = await receiver();
  const endpoint = await createWebhookEndpoint(db, { projectId: p.projectId, url: rx.url });
  const id = await running(p);
  // The execution ends in a transaction that sees the endpoint live and writes its delivery;
  // the deletion commits meanwhile and cannot see that delivery to fail it.
  await db.transaction(async (trx) => {
    await settleExecution(trx, {
      executionId: id,
      projectId: p.projectId,
      status: 'succeeded',
      chargedMicros: 10,
      from: ['running'],
      leaseOwner: LEASE,
      output: {},
    });
    expect(await deleteWebhookEndpoint(db, endpoint.id)).toBe(true);
  });
  expect(await listWebhookDeliveries(db, id)).toMatchObject([{ status: 'pending' }]);

  const d = deliverer();
  d.start();
  try {
    await until('the delivery closed', async () => (await listWebhookDeliveries(db, id))[0]?.status !== 'pending');
    await d.idle();
    expect(rx.got).toHaveLength(0);
    expect(await listWebhookDeliveries(db, id)).toMatchObject([{ status: 'failed', lastError: 'the endpoint was deleted', attempts: 0, lastStatusCode: null }]);
  } finally {
    await d.stop();
    await rx.close();
  }
});

it('a deletion under way when the delivery is claimed is waited for: the deleted endpoint gets nothing', async () => {
  const p = await seedProject(db, { creditMicros: 10_000 });
  const rx = await receiver();
  const endpoint = await createWebhookEndpoint(db, { projectId: p.projectId, url: rx.url });
  const id = await running(p);
  await settleExecution(db, {
    executionId: id,
    projectId: p.projectId,
    status: 'succeeded',
    chargedMicros: 10,
    from: ['running'],
    leaseOwner: LEASE,
    output: {},
  });

  // The operator's deletion has begun (it holds the endpoint's row) when a relay claims the delivery.
  const trx = await db.transaction();
  const d = deliverer();
  try {
    await trx('webhook_endpoints').where({ id: endpoint.id }).forUpdate();
    expect(await d.poll()).toBe(1);
    // the relay either sends at once, or waits on the deletion before sending
    await until('a request, or the relay waiting on the endpoint row', async () => {
      if (rx.got.length > 0) return true;
      const waiting = await db.raw<{ rows: unknown[] }>(
        `SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%webhook_endpoints%'`,
      );
      return waiting.rows.length > 0;
    });
    expect(await deleteWebhookEndpoint(trx, endpoint.id)).toBe(true);
    await trx.commit();
    await d.idle();
    expect(rx.got).toHaveLength(0);
    expect(await listWebhookDeliveries(db, id)).toMatchObject([{ status: 'failed', lastError: 'the endpoint was deleted' }]);
  } finally {
    if (!trx.isCompleted()) await trx.rollback();
    await d.stop();
    await rx.close();
  }
});

it("a retry is dated by the database's clock: a relay whose clock runs an hour ahead still retries after its delay", async () => {
  const p = await seedProject(db, { creditMicros: 10_000 });
  const rx = await receiver((n) => (n === 0 ? 500 : 204));
  await createWebhookEndpoint(db, { projectId: p.projectId, url: rx.url });
  const realNow = Date.now.bind(Date);
  const skewed = jest.spyOn(Date, 'now').mockImplementation(() => realNow() + 3_600_000);
  const d = deliverer([100]);
  d.start();
  try {
    const id = await running(p);
    await settleExecution(db, {
      executionId: id,
      projectId: p.projectId,
      status: 'succeeded',
      chargedMicros: 10,
      from: ['running'],
      leaseOwner: LEASE,
      output: {},
    });
    await until('the retry delivered', async () => (await listWebhookDeliveries(db, id))[0]?.status === 'delivered');
    expect(rx.got).toHaveLength(2);
    expect(await listWebhookDeliveries(db, id)).toMatchObject([{ status: 'delivered', attempts: 2, lastStatusCode: 204 }]);
  } finally {
    skewed.mockRestore();
    await d.stop();
    await rx.close();
  }
});

it("the previous release's relay statements still work on this schema (a rolling deploy runs both)", async () => {
  const p = await seedProject(db, { creditMicros: 10_000 });
  const endpoint = await createWebhookEndpoint(db, { projectId: p.projectId, url: 'https://old-relay.test/' });
  const id = await running(p);
  await settleExecution(db, {
    executionId: id,
    projectId: p.projectId,
    status: 'failed',
    chargedMicros: 0,
    from: ['running'],
    leaseOwner: LEASE,
    errorCode: 'provider_error',
  });
  // the claim, payload fix and outcome of migration 20261123000013's relay, as it has them
  const claimed = await db.raw<{ rows: { id: string; url: string; payload: unknown; attempts: number }[] }>(
    `WITH due AS (
       SELECT d.id, row_number() OVER (PARTITION BY d.endpoint_id ORDER BY d.next_attempt_at) AS n
         FROM webhook_deliveries d
        WHERE d.status = 'pending' AND d.next_attempt_at <= now() AND d.endpoint_id <> ALL(:exclude::text[])
        ORDER BY d.next_attempt_at LIMIT 100
     ), picked AS (
       SELECT d.id FROM webhook_deliveries d JOIN due ON due.id = d.id
        WHERE due.n <= 4 AND d.status = 'pending' AND d.next_attempt_at <= now()
        ORDER BY d.next_attempt_at LIMIT 10
          FOR UPDATE OF d SKIP LOCKED
     )
     UPDATE webhook_deliveries d
        SET next_attempt_at = now() + (15000 * interval '1 millisecond'), attempts = d.attempts + 1
       FROM picked, webhook_endpoints w
      WHERE d.id = picked.id AND w.id = d.endpoint_id
      RETURNING d.id, d.endpoint_id, d.project_id, d.execution_id, d.event_type, w.url, w.secret, d.payload, d.event_at, d.attempts - 1 AS attempts`,
    { exclude: [] },
  );
  const mine = claimed.rows.filter((r) => r.url === 'https://old-relay.test/');
  expect(mine).toMatchObject([{ payload: null, attempts: 0 }]);
  await db('webhook_deliveries')
    .where({ id: mine[0]!.id })
    .whereNull('payload')
    .update({ payload: JSON.stringify({ type: 'execution.failed' }) });
  await db('webhook_deliveries')
    .where({ id: mine[0]!.id, status: 'pending' })
    .update({ last_status_code: 500, last_error: 'HTTP 500', next_attempt_at: new Date(Date.now() + 1_000) });
  expect(await listWebhookDeliveries(db, id)).toMatchObject([{ endpointId: endpoint.id, status: 'pending', attempts: 1, lastStatusCode: 500 }]);
});

it('the ledger audits clean after these settlements and resolutions', async () => {
  expect((await auditLedger(db)).ok).toBe(true);
});
