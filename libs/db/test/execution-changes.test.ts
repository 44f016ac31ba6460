import { newId } from '@tes/core';
import {
  claimDueDeliveries,
  claimExecution,
  createWebhookEndpoint,
  deleteWebhookEndpoint,
  EXECUTION_CHANGES_CHANNEL,
  finishStep,
  getExecutionWithSteps,
  listWebhookDeliveries,
  listWebhookEndpoints,
  markNeedsReview,
  NotificationListener,
  publishPrices,
  recordDeliveryAttempt,
  renewLease,
  settleExecution,
  startStep,
  submitExecution,
} from '@tes/db';
import { seedProject, useTestDatabase } from '@tes/testing';

/**
 * Migration 20261123000013: an execution's version grows with every change its public object
 * shows and with nothing else, a notification follows each committed change, and every terminal
 * (or needs_review) state has its webhook deliveries from the statement that wrote it.
 */
const { db, database } = useTestDatabase({ poolMax: 4 });
let listener: NotificationListener;
const notified: string[] = [];

beforeAll(async () => {
  let ready!: () => void;
  const listening = new Promise<void>((r) => (ready = r));
  listener = new NotificationListener({
    url: database.url,
    channels: { [EXECUTION_CHANGES_CHANNEL]: (id) => notified.push(id) },
    onListening: (on) => on && ready(),
  });
  await listener.start();
  await listening;
});
afterAll(async () => {
  await listener?.stop();
});

async function submitted(projectId: string, keyId: string, priceVersion: string): Promise<string> {
  const id = newId('exe');
  const r = await submitExecution(db, {
    id,
    projectId,
    apiKeyId: keyId,
    tool: 'test.sleep',
    model: 'sleep',
    category: 'test',
    arguments: {},
    priceVersion,
    totalSteps: 2,
    reservedMicros: 1_000,
    idempotencyKey: `k-${id}`,
    requestDigest: 'd',
    dispatchDeadlineMs: 60_000,
  });
  expect(r.kind).toBe('created');
  return id;
}

const version = async (projectId: string, id: string) => (await getExecutionWithSteps(db, projectId, id))!.version;
const settle = () => new Promise((r) => setTimeout(r, 150));

it('versions grow with visible changes only, in commit order, and each committed change is notified', async () => {
  const p = await seedProject(db, { creditMicros: 100_000 });
  const { priceVersion } = await publishPrices(db, { 'test.sleep': 1 });
  const id = await submitted(p.projectId, p.keyId, priceVersion);
  const seen = [await version(p.projectId, id)];
  const step = async (label: string, change: () => Promise<unknown>, visible: boolean) => {
    notified.length = 0;
    await change();
    await settle();
    const v = await version(p.projectId, id);
    if (visible) {
      expect({ label, grew: v > seen.at(-1)! }).toEqual({ label, grew: true });
      expect({ label, notified }).toEqual({ label, notified: [id] });
    } else {
      expect({ label, v }).toEqual({ label, v: seen.at(-1) });
      expect({ label, notified }).toEqual({ label, notified: [] });
    }
    seen.push(v);
  };
  await step('claim', () => claimExecution(db, id, 'w1', 30_000), true);
  await step('lease renewal', () => renewLease(db, id, 'w1:1', 30_000), false);
  await step('step start', () => startStep(db, { executionId: id, projectId: p.projectId, index: 0, name: 'sleep', owner: 'w1:1' }), true);
  await step('step end', () => finishStep(db, { executionId: id, projectId: p.projectId, index: 0, owner: 'w1:1', status: 'succeeded', costMicros: 10 }), true);
  await step(
    'fenced-out write',
    () => finishStep(db, { executionId: id, projectId: p.projectId, index: 0, owner: 'zombie', status: 'failed', costMicros: 0 }),
    false,
  );
  await step('cancel requested', () => db('executions').where({ id }).update({ cancel_requested: true }), true);
  await step(
    'settle',
    () => settleExecution(db, { executionId: id, projectId: p.projectId, status: 'cancelled', chargedMicros: 10, from: ['running'], leaseOwner: 'w1:1' }),
    true,
  );
  // a rolled-back change is neither versioned nor notified
  notified.length = 0;
  await db
    .transaction(async (trx) => {
      await trx('executions').where({ id }).update({ error_message: 'never' });
      await trx.rollback();
    })
    .catch(() => undefined);
  await settle();
  expect(notified).toEqual([]);
  expect(await version(p.projectId, id)).toBe(seen.at(-1));
});

it('writes one delivery per subscribed endpoint in the statement that ends an execution', async () => {
  const p = await seedProject(db, { creditMicros: 100_000 });
  const other = await seedProject(db, { creditMicros: 100_000 });
  const { priceVersion } = await publishPrices(db, { 'test.sleep': 1 });
  const all = await createWebhookEndpoint(db, { projectId: p.projectId, url: 'https://example.test/all' });
  const onlyFailed = await createWebhookEndpoint(db, { projectId: p.projectId, url: 'https://example.test/failed', events: ['execution.failed'] });
  await createWebhookEndpoint(db, { projectId: other.projectId, url: 'https://example.test/other' });
  expect(all.secret).toMatch(/^whsec_[A-Za-z0-9+/]{32}$/);
  expect((await listWebhookEndpoints(db, p.projectId)).map((e) => e.id)).toEqual([all.id, onlyFailed.id].sort());

  const ok = await submitted(p.projectId, p.keyId, priceVersion);
  await claimExecution(db, ok, 'w', 30_000);
  await settleExecution(db, { executionId: ok, projectId: p.projectId, status: 'succeeded', chargedMicros: 1, from: ['running'], leaseOwner: 'w:1' });
  expect((await listWebhookDeliveries(db, ok)).map((d) => [d.endpointId, d.eventType, d.status])).toEqual([[all.id, 'execution.succeeded', 'pending']]);

  const review = await submitted(p.projectId, p.keyId, priceVersion);
  await claimExecution(db, review, 'w', 30_000);
  await markNeedsReview(db, { executionId: review, owner: 'w:1', errorCode: 'provider_outcome_unknown', errorMessage: 'x' });
  // resolved by an operator: a second event, for the terminal state
  await settleExecution(db, { executionId: review, projectId: p.projectId, status: 'failed', chargedMicros: 0, from: ['needs_review'], kind: 'resolve' });
  const events = (await listWebhookDeliveries(db, review)).map((d) => `${d.eventType}@${d.endpointId === all.id ? 'all' : 'failed'}`).sort();
  expect(events).toEqual(['execution.failed@all', 'execution.failed@failed', 'execution.needs_review@all']);

  // a deleted endpoint gets nothing new, and its pending deliveries end failed
  expect(await deleteWebhookEndpoint(db, all.id)).toBe(true);
  expect(await deleteWebhookEndpoint(db, all.id)).toBe(false);
  expect((await listWebhookDeliveries(db, ok))[0]!.status).toBe('failed');
});

it('claims due deliveries as leases, at most perProject per project, and records outcomes fenced by the claim', async () => {
  await db('webhook_deliveries').where({ status: 'pending' }).update({ status: 'failed' }); // the earlier tests'
  const p = await seedProject(db, { creditMicros: 1_000_000 });
  const q = await seedProject(db, { creditMicros: 1_000_000 });
  const { priceVersion } = await publishPrices(db, { 'test.sleep': 1 });
  const ended = async (project: { projectId: string; keyId: string }) => {
    const id = await submitted(project.projectId, project.keyId, priceVersion);
    await claimExecution(db, id, 'w', 30_000);
    await settleExecution(db, { executionId: id, projectId: project.projectId, status: 'succeeded', chargedMicros: 1, from: ['running'], leaseOwner: 'w:1' });
    return id;
  };
  const slow = await createWebhookEndpoint(db, { projectId: p.projectId, url: 'https://slow.test/' });
  for (let i = 0; i < 6; i++) await ended(p);
  const fast = await createWebhookEndpoint(db, { projectId: q.projectId, url: 'https://fast.test/' });
  const late = await ended(q);

  await db('webhook_deliveries')
    .whereIn('endpoint_id', [slow.id, fast.id])
    .update({ next_attempt_at: db.raw("now() - interval '1 second'") });
  const claim = () => claimDueDeliveries(db, { limit: 10, perProject: 2, perOrganization: 10, leaseMs: 60_000 });
  const first = await claim();
  const byUrl = (list: { url: string }[]) => list.map((d) => d.url).sort();
  // the other project's one delivery is not queued behind this project's six
  expect(byUrl(first)).toEqual(['https://fast.test/', 'https://slow.test/', 'https://slow.test/']);
  expect(first.every((d) => d.attempts === 0 && d.attempt === 1 && d.payload === null && d.secret.startsWith('whsec_'))).toBe(true);
  // claimed rows are leased: a second pass takes the others
  const second = await claim();
  expect(byUrl(second)).toEqual(['https://slow.test/', 'https://slow.test/']);

  const d = first.find((x) => x.url === 'https://fast.test/')!;
  await recordDeliveryAttempt(db, d.id, { attempt: d.attempt, delivered: false, statusCode: 500, error: 'HTTP 500', retryInMs: -1000 });
  const retried = await claim();
  // the retry (its second attempt) and the slow endpoint's last two
  expect(retried.map((x) => [x.url, x.attempts, x.id === d.id]).sort()).toEqual([
    ['https://fast.test/', 1, true],
    ['https://slow.test/', 0, false],
    ['https://slow.test/', 0, false],
  ]);
  // the first attempt's outcome, written late (after the second claim), changes nothing
  expect(await recordDeliveryAttempt(db, d.id, { attempt: 1, delivered: false, statusCode: 500, error: 'late', retryInMs: 1 })).toEqual({
    recorded: false,
    retryAt: null,
  });
  expect(await recordDeliveryAttempt(db, d.id, { attempt: 2, delivered: true, statusCode: 204, error: null, retryInMs: null })).toEqual({
    recorded: true,
    retryAt: null,
  });
  const row = (await listWebhookDeliveries(db, late)).find((x) => x.id === d.id);
  expect(row).toMatchObject({ status: 'delivered', attempts: 2, lastStatusCode: 204, nextAttemptAt: null });
  expect(row!.deliveredAt).not.toBeNull();
});
