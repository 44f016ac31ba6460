import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { auditLedger, createProject, creditBalance, createWebhookEndpoint, listWebhookDeliveries } from '@tes/db';
import { createMetrics, createNullLogger } from '@tes/observability';
import { GuardedHttp } from '@tes/outbound';
import { addKey, seedProject, useTestDatabase } from '@tes/testing';
import { WebhookDeliverer } from '../src/webhooks';
import { endedExecution, until } from './webhook-fixtures';

/**
 * Slow webhook receivers (issue #25), against real receivers on loopback: a receiver that
 * answers its headers and then trickles its body holds a relay slot only until the attempt's
 * whole deadline, only within its project's (and organization's) share of the slots, and a
 * delivery is never sent again while an attempt of it is still open.
 */
const { db } = useTestDatabase({ poolMax: 8 });

interface Attempt {
  id: string;
  openedAt: number;
  closedAt?: number;
}

interface Receiver {
  url: string;
  attempts: Attempt[];
  /** Attempts whose connection is still open. */
  open: () => number;
  /** The most attempts of one webhook-id open at once. */
  mostOpenOfOneId: () => number;
  close: () => Promise<void>;
}

/**
 * A receiver that answers 200 and its headers at once, then one byte of body every
 * `everyMs`, ending the body after `forMs` (never, by default). With `everyMs` 0 it answers
 * 204 at once.
 */
async function receiver(everyMs: number, forMs = Infinity): Promise<Receiver> {
  const attempts: Attempt[] = [];
  const openById = new Map<string, number>();
  let mostOpen = 0;
  const server = http.createServer((req, res) => {
    const attempt: Attempt = { id: String(req.headers['webhook-id']), openedAt: Date.now() };
    attempts.push(attempt);
    const openNow = (openById.get(attempt.id) ?? 0) + 1;
    openById.set(attempt.id, openNow);
    mostOpen = Math.max(mostOpen, openNow);
    const closed = () => {
      attempt.closedAt = Date.now();
      openById.set(attempt.id, openById.get(attempt.id)! - 1);
    };
    req.resume();
    if (everyMs === 0) {
      res.on('close', closed);
      res.writeHead(204).end();
      return;
    }
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.flushHeaders();
    const timer = setInterval(() => {
      if (Date.now() - attempt.openedAt >= forMs) res.end('.');
      else res.write('.');
    }, everyMs);
    res.on('close', () => {
      clearInterval(timer);
      closed();
    });
  });
  server.keepAliveTimeout = 100;
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hooks`,
    attempts,
    open: () => attempts.filter((a) => a.closedAt === undefined).length,
    mostOpenOfOneId: () => mostOpen,
    close: () =>
      new Promise((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

function deliverer(options: { concurrency: number; timeoutMs: number; retryDelaysMs: number[] }): WebhookDeliverer {
  return new WebhookDeliverer({
    db,
    http: new GuardedHttp({ allowPrivateNetworks: true }),
    logger: createNullLogger(),
    metrics: createMetrics('relay', false),
    pollMs: 20,
    ...options,
  });
}

async function deliveriesOf(executionIds: string[]) {
  return (await Promise.all(executionIds.map((id) => listWebhookDeliveries(db, id)))).flat();
}

beforeEach(async () => {
  await db('webhook_deliveries').where({ status: 'pending' }).update({ status: 'failed' }); // the earlier tests'
});

/**
 * The slow side: `endpoints` trickling receivers (one byte every 300 ms, for ever), spread over
 * the projects given, four deliveries each: 16 in all, as many as the relay's slots. The quick
 * side: one project of another organization whose receiver answers at once. Once the slow
 * deliveries have taken what they may, the quick project's 12 executions end; each of its
 * deliveries must arrive within 2 s of its execution's end (the relay polls every 20 ms and its
 * receiver answers at once: an idle relay delivers in tens of ms), while the slow ones stay open.
 */
async function slowAndQuick(slowProjects: { projectId: string; keyId: string }[], expectSlowOpen: { atMost: number }): Promise<void> {
  const slow = await Promise.all(slowProjects.map(() => receiver(300)));
  const quickProject = await seedProject(db, { creditMicros: 100_000 });
  const quick = await receiver(0);
  for (const [i, p] of slowProjects.entries()) await createWebhookEndpoint(db, { projectId: p.projectId, url: slow[i]!.url });
  await createWebhookEndpoint(db, { projectId: quickProject.projectId, url: quick.url });
  // a long deadline: the slow attempts stay open for the whole test
  const d = deliverer({ concurrency: 16, timeoutMs: 30_000, retryDelaysMs: [60_000] });
  d.start();
  try {
    const slowExecutions: string[] = [];
    for (let i = 0; i < 16 / slowProjects.length; i++) {
      for (const p of slowProjects) slowExecutions.push(await endedExecution(db, p.projectId, p.keyId));
    }
    const slowOpen = () => slow.reduce((n, r) => n + r.open(), 0);
    await until('the slow deliveries to take their slots', () => slowOpen() >= 4);
    await new Promise((r) => setTimeout(r, 500)); // every slot they may take, taken

    const ended = new Map<string, number>();
    for (let i = 0; i < 12; i++) ended.set(await endedExecution(db, quickProject.projectId, quickProject.keyId), Date.now());
    await until('the quick project’s 12 deliveries', async () => (await deliveriesOf([...ended.keys()])).every((x) => x.status === 'delivered'), 5_000);
    for (const row of await deliveriesOf([...ended.keys()])) {
      expect(Date.parse(row.deliveredAt!) - ended.get(row.executionId)!).toBeLessThan(2_000);
    }
    expect(quick.attempts).toHaveLength(12);
    // the slow ones are still stuck, within their share
    expect(slowOpen()).toBeGreaterThanOrEqual(4);
    expect(slowOpen()).toBeLessThanOrEqual(expectSlowOpen.atMost);
    expect((await deliveriesOf(slowExecutions)).some((x) => x.status === 'delivered')).toBe(false);
  } finally {
    await d.stop();
    await Promise.all([...slow, quick].map((r) => r.close()));
  }
}

it('four trickling endpoints of one project hold a quarter of the slots: another project’s 12 deliveries arrive as usual', async () => {
  const p = await seedProject(db, { creditMicros: 100_000 });
  // one project, four endpoints: it may hold 16 / 4 = 4 slots
  await slowAndQuick([p, p, p, p], { atMost: 4 });
}, 30_000);

it('trickling endpoints of four projects of one organization hold half of the slots: another organization’s deliveries arrive as usual', async () => {
  const first = await seedProject(db, { creditMicros: 100_000 });
  const projects = [first];
  for (let i = 0; i < 3; i++) {
    const { id } = await createProject(db, { organizationId: first.organizationId, name: `sibling ${i}` });
    await creditBalance(db, { projectId: id, micros: 100_000, reference: 'test' });
    projects.push({ ...first, projectId: id, keyId: (await addKey(db, id)).id });
  }
  // four projects of one organization: 4 slots each, but 16 / 2 = 8 together
  await slowAndQuick(projects, { atMost: 8 });
}, 30_000);

it('a trickled attempt longer than the old claim lease is never sent twice at once, and each attempt is counted once', async () => {
  const p = await seedProject(db, { creditMicros: 100_000 });
  // answers its headers, then a byte every 200 ms for 9 s: longer than the old lease (1 s × 2 + 5 s)
  const rx = await receiver(200, 9_000);
  await createWebhookEndpoint(db, { projectId: p.projectId, url: rx.url });
  // two relays, as in production: the one that did not send it is free to claim it again
  const relays = [0, 1].map(() => deliverer({ concurrency: 16, timeoutMs: 1_000, retryDelaysMs: Array<number>(30).fill(300) }));
  for (const r of relays) r.start();
  let id: string;
  try {
    id = await endedExecution(db, p.projectId, p.keyId);
    await new Promise((r) => setTimeout(r, 9_500));
    expect(rx.mostOpenOfOneId()).toBe(1);
    expect(rx.attempts.length).toBeGreaterThanOrEqual(2); // the deadline ended the first, a retry followed
  } finally {
    await Promise.all(relays.map((r) => r.stop()));
    await rx.close();
  }
  // every attempt the receiver saw was counted, and none twice: the retry schedule is spent one step per attempt
  expect(new Set(rx.attempts.map((a) => a.id)).size).toBe(1);
  const [row] = await listWebhookDeliveries(db, id);
  expect(row!.attempts).toBe(rx.attempts.length);
}, 30_000);

it('WEBHOOK_TIMEOUT_MS ends a trickled attempt as a whole, which is recorded as failed and retried', async () => {
  const p = await seedProject(db, { creditMicros: 100_000 });
  const rx = await receiver(200); // a byte every 200 ms, for ever: an idle timeout of 1 s never fires
  await createWebhookEndpoint(db, { projectId: p.projectId, url: rx.url });
  const d = deliverer({ concurrency: 4, timeoutMs: 1_000, retryDelaysMs: [60_000] });
  d.start();
  try {
    const id = await endedExecution(db, p.projectId, p.keyId);
    await until('the attempt’s outcome', async () => (await listWebhookDeliveries(db, id))[0]?.lastError != null, 5_000);
    const [attempt] = rx.attempts;
    expect(attempt!.closedAt).toBeDefined();
    const lasted = attempt!.closedAt! - attempt!.openedAt;
    expect(lasted).toBeGreaterThanOrEqual(900);
    expect(lasted).toBeLessThan(1_500);
    const [row] = await listWebhookDeliveries(db, id);
    expect(row).toMatchObject({ status: 'pending', attempts: 1, lastStatusCode: null });
    expect(row!.lastError).toMatch(/no complete answer within the 1000 ms deadline/);
    // retried after the schedule's first delay (±10 %)
    const retryIn = Date.parse(row!.nextAttemptAt!) - Date.now();
    expect(retryIn).toBeGreaterThan(50_000);
    expect(retryIn).toBeLessThan(67_000);
  } finally {
    await d.stop();
    await rx.close();
  }
}, 30_000);

it('the ledger audits clean after these executions', async () => {
  expect((await auditLedger(db)).problems).toEqual([]);
});
