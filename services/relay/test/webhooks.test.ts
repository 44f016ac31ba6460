import { createHmac } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createWebhookEndpoint, listWebhookDeliveries } from '@tes/db';
import { createMetrics, createNullLogger } from '@tes/observability';
import { GuardedHttp } from '@tes/outbound';
import { seedProject, useTestDatabase } from '@tes/testing';
import { WebhookDeliverer } from '../src/webhooks';
import { endedExecution, until } from './webhook-fixtures';

/**
 * The relay's webhook deliveries against a real receiver on loopback: signed as Standard
 * Webhooks says (checked here by code of its own, not the signer's), retried after failures
 * with the same id and body, and refused at connect time when private addresses are not allowed.
 */
const { db, database } = useTestDatabase({ poolMax: 4 });

interface Received {
  headers: http.IncomingHttpHeaders;
  body: string;
}

/** A receiver that answers `statusFor(n)` to its n-th request (from 0). */
async function receiver(statusFor: (n: number) => number): Promise<{ url: string; got: Received[]; close: () => Promise<void> }> {
  const got: Received[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const n = got.length;
      got.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      res.writeHead(statusFor(n)).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}/hooks`, got, close: () => new Promise((r) => server.close(() => r())) };
}

/** Standard Webhooks verification, written from the specification (not with libs/outbound). */
function verify(secret: string, r: Received): boolean {
  const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64');
  const signed = `${String(r.headers['webhook-id'])}.${String(r.headers['webhook-timestamp'])}.${r.body}`;
  const expected = createHmac('sha256', key).update(signed).digest('base64');
  return String(r.headers['webhook-signature']).split(' ').includes(`v1,${expected}`);
}

function deliverer(allowPrivateNetworks: boolean, retryDelaysMs: number[]): WebhookDeliverer {
  return new WebhookDeliverer({
    db,
    http: new GuardedHttp({ allowPrivateNetworks }),
    logger: createNullLogger(),
    metrics: createMetrics('relay', false),
    concurrency: 8,
    timeoutMs: 2_000,
    retryDelaysMs,
    pollMs: 20,
  });
}

it('a receiver that fails, then recovers, gets the event signed, with the same id and body on every attempt', async () => {
  const p = await seedProject(db, { creditMicros: 10_000 });
  const rx = await receiver((n) => (n < 2 ? 500 : 204));
  const endpoint = await createWebhookEndpoint(db, { projectId: p.projectId, url: rx.url });
  const d = deliverer(true, [50, 50, 50]);
  d.start();
  try {
    const id = await endedExecution(db, p.projectId, p.keyId, 'succeeded');
    await until('delivery', async () => (await listWebhookDeliveries(db, id))[0]?.status === 'delivered');
    expect(rx.got).toHaveLength(3);
    for (const r of rx.got) expect(verify(endpoint.secret, r)).toBe(true);
    expect(new Set(rx.got.map((r) => r.headers['webhook-id'])).size).toBe(1);
    expect(new Set(rx.got.map((r) => r.body)).size).toBe(1);
    const [first] = rx.got;
    expect(first!.headers['content-type']).toBe('application/json');
    expect(Math.abs(Number(first!.headers['webhook-timestamp']) - Date.now() / 1000)).toBeLessThan(30);
    const body = JSON.parse(first!.body) as { type: string; timestamp: string; data: Record<string, unknown> };
    expect(body.type).toBe('execution.succeeded');
    expect(Number.isNaN(Date.parse(body.timestamp))).toBe(false);
    expect(body.data).toMatchObject({ id, status: 'succeeded', chargedMicros: 40, output: { ok: true }, currency: 'usd' });
    // a body signed with another secret does not verify
    expect(verify('whsec_' + Buffer.alloc(24, 1).toString('base64'), first!)).toBe(false);
    const [row] = await listWebhookDeliveries(db, id);
    expect(row).toMatchObject({ status: 'delivered', attempts: 3, lastStatusCode: 204 });
  } finally {
    await d.stop();
    await rx.close();
  }
});

it('gives up after the retry schedule and says why; loopback is refused unless allowed, before any byte is sent', async () => {
  const p = await seedProject(db, { creditMicros: 10_000 });
  const rx = await receiver(() => 200);
  await createWebhookEndpoint(db, { projectId: p.projectId, url: rx.url, events: ['execution.failed'] });
  const d = deliverer(false, [30]);
  d.start();
  try {
    const ignored = await endedExecution(db, p.projectId, p.keyId, 'succeeded'); // not subscribed
    const id = await endedExecution(db, p.projectId, p.keyId, 'failed');
    await until('failure', async () => (await listWebhookDeliveries(db, id))[0]?.status === 'failed');
    const [row] = await listWebhookDeliveries(db, id);
    expect(row).toMatchObject({ status: 'failed', attempts: 2, lastStatusCode: null, nextAttemptAt: null });
    expect(row!.lastError).toMatch(/refusing to connect to 127\.0\.0\.1/);
    expect(rx.got).toHaveLength(0);
    expect(await listWebhookDeliveries(db, ignored)).toEqual([]);
  } finally {
    await d.stop();
    await rx.close();
  }
});

it('with a LISTEN connection, a delivery goes out as its execution ends, not at the next poll', async () => {
  const p = await seedProject(db, { creditMicros: 10_000 });
  const rx = await receiver(() => 204);
  await createWebhookEndpoint(db, { projectId: p.projectId, url: rx.url });
  const d = new WebhookDeliverer({
    db,
    http: new GuardedHttp({ allowPrivateNetworks: true }),
    logger: createNullLogger(),
    metrics: createMetrics('relay', false),
    concurrency: 4,
    timeoutMs: 2_000,
    retryDelaysMs: [50],
    pollMs: 60_000,
    databaseUrl: database.url,
  });
  d.start();
  try {
    await new Promise((r) => setTimeout(r, 300)); // the first poll and the LISTEN are done
    const ended = Date.now();
    const id = await endedExecution(db, p.projectId, p.keyId, 'succeeded');
    await until('delivery', async () => (await listWebhookDeliveries(db, id))[0]?.status === 'delivered', 5_000);
    // a minute's poll would not have found it yet
    expect(Date.now() - ended).toBeLessThan(3_000);
    expect(rx.got).toHaveLength(1);
  } finally {
    await d.stop();
    await rx.close();
  }
});
