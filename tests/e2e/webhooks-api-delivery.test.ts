import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook, WebhookVerificationError } from 'standardwebhooks';
import { bearer, useStack, waitForExecution } from '../stack';

/**
 * Issue #29's done-when: an endpoint registered through the API with the project's own key
 * receives signed events that the npm `standardwebhooks` library (not our code) verifies; its
 * deliveries and attempts are read back through the API; a test event and a rotated secret.
 * WEBHOOK_ALLOW_PRIVATE lets the relay and the API reach this file's receiver on loopback, as
 * the other webhook tests do.
 */
const stack = useStack({ env: { WEBHOOK_ALLOW_PRIVATE: '1', WEBHOOK_RETRY_DELAYS_MS: '200,200,200,200', WEBHOOK_TIMEOUT_MS: '1500' } });

interface Received {
  headers: Record<string, string>;
  body: string;
}

/** A receiver on loopback that records every request and answers with `status()`. */
async function receiver(status: () => number = () => 204) {
  const got: Received[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      got.push({ headers: req.headers as Record<string, string>, body: Buffer.concat(chunks).toString('utf8') });
      res.writeHead(status()).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    got,
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/tes`,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

async function until(done: () => boolean | Promise<boolean>, ms = 15_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await done())) {
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function submitSleep(secret: string, key: string): Promise<string> {
  const args = { seconds: 0, steps: 1, costMicrosPerStep: 10 };
  const q = await stack.http().post('/tools/quote').set(bearer(secret)).send({ tool: 'test.sleep', arguments: args });
  const res = await stack
    .http()
    .post('/tools/test.sleep')
    .set({ ...bearer(secret), 'Idempotency-Key': key })
    .send({ tool: 'test.sleep', arguments: args, priceVersion: q.body.data.priceVersion, maximumChargeMicros: q.body.data.maximumChargeMicros });
  expect(res.status).toBeLessThan(300);
  return res.body.data.id as string;
}

it('an endpoint made with the project key gets a signed execution event that standardwebhooks verifies; its deliveries are listed', async () => {
  const p = await stack.seed({ creditMicros: 1_000_000 });
  const r = await receiver();
  try {
    const made = await stack
      .http()
      .post('/tools/webhooks')
      .set(bearer(p.secret))
      .send({ url: r.url, events: ['execution.succeeded'] });
    expect(made.status).toBe(201);
    const { id: endpointId, secret } = made.body.data as { id: string; secret: string };

    const executionId = await submitSleep(p.secret, 'hook-api-0001');
    await waitForExecution(stack, p.secret, executionId);
    await until(() => r.got.length >= 1);

    const event = new Webhook(secret).verify(r.got[0]!.body, r.got[0]!.headers) as { type: string; data: { id: string; status: string } };
    expect(event.type).toBe('execution.succeeded');
    expect(event.data).toMatchObject({ id: executionId, status: 'succeeded' });
    // a changed body or another secret is refused by the same library
    expect(() => new Webhook(secret).verify(r.got[0]!.body.replace('succeeded', 'failed'), r.got[0]!.headers)).toThrow(WebhookVerificationError);

    await until(async () => (await stack.http().get(`/tools/webhooks/${endpointId}/deliveries`).set(bearer(p.secret))).body.data[0]?.status === 'delivered');
    const deliveries = await stack.http().get(`/tools/webhooks/${endpointId}/deliveries`).set(bearer(p.secret));
    expect(deliveries.body.data).toEqual([
      expect.objectContaining({
        id: r.got[0]!.headers['webhook-id'],
        endpointId,
        executionId,
        eventType: 'execution.succeeded',
        status: 'delivered',
        attempts: 1,
        lastStatusCode: 204,
        lastError: null,
        nextAttemptAt: null,
      }),
    ]);

    // another project's ADMIN key, given this endpoint's id, learns nothing of these deliveries
    const b = await stack.seed();
    const theirs = await stack.http().get(`/tools/webhooks/${endpointId}/deliveries`).set(bearer(b.secret));
    expect(theirs.status).toBe(404);
    expect(theirs.body.error.message).toBe('webhook_endpoint_not_found');
  } finally {
    await r.close();
  }
});

it('a receiver that fails is retried: the deliveries show each attempt counted and the last answer', async () => {
  const p = await stack.seed({ creditMicros: 1_000_000 });
  let failing = true;
  const r = await receiver(() => (failing ? 503 : 200));
  try {
    const endpointId = (await stack.http().post('/tools/webhooks').set(bearer(p.secret)).send({ url: r.url })).body.data.id as string;
    const executionId = await submitSleep(p.secret, 'hook-api-0002');
    await waitForExecution(stack, p.secret, executionId);
    await until(() => r.got.length >= 2);
    const pending = (await stack.http().get(`/tools/webhooks/${endpointId}/deliveries`).set(bearer(p.secret))).body.data[0];
    expect(pending).toMatchObject({ executionId, lastStatusCode: 503, lastError: 'HTTP 503' });
    expect(pending.attempts).toBeGreaterThanOrEqual(2);
    failing = false;
    await until(async () => (await stack.http().get(`/tools/webhooks/${endpointId}/deliveries`).set(bearer(p.secret))).body.data[0]?.status === 'delivered');
    const done = (await stack.http().get(`/tools/webhooks/${endpointId}/deliveries?limit=1`).set(bearer(p.secret))).body.data;
    expect(done).toHaveLength(1);
    expect(done[0]).toMatchObject({ status: 'delivered', lastStatusCode: 200, attempts: r.got.length });
  } finally {
    await r.close();
  }
});

it('a test event is sent now, signed with the current secret; after a rotation the old secret no longer verifies', async () => {
  const p = await stack.seed();
  let status = 204;
  const r = await receiver(() => status);
  try {
    const made = (await stack.http().post('/tools/webhooks').set(bearer(p.secret)).send({ url: r.url })).body.data as { id: string; secret: string };
    const sent = await stack.http().post(`/tools/webhooks/${made.id}/test`).set(bearer(p.secret));
    expect(sent.status).toBe(200);
    expect(sent.body.data).toMatchObject({ delivered: true, statusCode: 204, error: null, webhookId: expect.stringMatching(/^msg_/) });
    expect(r.got).toHaveLength(1);
    const event = new Webhook(made.secret).verify(r.got[0]!.body, r.got[0]!.headers) as { type: string; data: unknown };
    expect(event).toMatchObject({ type: 'webhook.test', data: { endpointId: made.id, projectId: p.projectId } });
    expect(r.got[0]!.headers['webhook-id']).toBe(sent.body.data.webhookId);

    const rotated = (await stack.http().post(`/tools/webhooks/${made.id}/rotate-secret`).set(bearer(p.secret))).body.data as { secret: string };
    status = 500;
    const failed = await stack.http().post(`/tools/webhooks/${made.id}/test`).set(bearer(p.secret));
    expect(failed.body.data).toMatchObject({ delivered: false, statusCode: 500, error: 'HTTP 500' });
    const second = r.got[1]!;
    expect(new Webhook(rotated.secret).verify(second.body, second.headers)).toMatchObject({ type: 'webhook.test' });
    expect(() => new Webhook(made.secret).verify(second.body, second.headers)).toThrow(WebhookVerificationError);

    // a test event is not a delivery: nothing recorded, nothing retried
    expect((await stack.http().get(`/tools/webhooks/${made.id}/deliveries`).set(bearer(p.secret))).body.data).toEqual([]);
    // the secret never reaches the logs
    const logged = JSON.stringify(stack.logs.records);
    expect(logged).not.toContain(made.secret);
    expect(logged).not.toContain(rotated.secret);
  } finally {
    await r.close();
  }
});

it('a receiver that never answers: the test ends at the delivery deadline with the reason', async () => {
  const p = await stack.seed();
  const silent = http.createServer(() => undefined);
  await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
  try {
    const url = `http://127.0.0.1:${(silent.address() as AddressInfo).port}/`;
    const id = (await stack.http().post('/tools/webhooks').set(bearer(p.secret)).send({ url })).body.data.id as string;
    const started = Date.now();
    const sent = await stack.http().post(`/tools/webhooks/${id}/test`).set(bearer(p.secret));
    expect(sent.body.data).toMatchObject({ delivered: false, statusCode: null });
    expect(sent.body.data.error).toMatch(/deadline|timed out|timeout/i);
    expect(Date.now() - started).toBeLessThan(stack.config.webhookTimeoutMs + 3_000);
  } finally {
    silent.closeAllConnections();
    await new Promise((r) => silent.close(r));
  }
});

it('a project has at most 2 test sends open at once: a third is refused (429) while they wait, and another project is not', async () => {
  const p = await stack.seed();
  const other = await stack.seed();
  const slow = http.createServer((req, res) => {
    req.resume();
    setTimeout(() => res.writeHead(204).end(), 700);
  });
  await new Promise<void>((r) => slow.listen(0, '127.0.0.1', r));
  try {
    const url = `http://127.0.0.1:${(slow.address() as AddressInfo).port}/`;
    const mine = (await stack.http().post('/tools/webhooks').set(bearer(p.secret)).send({ url })).body.data.id as string;
    const theirs = (await stack.http().post('/tools/webhooks').set(bearer(other.secret)).send({ url })).body.data.id as string;
    const send = (secret: string, id: string) => stack.http().post(`/tools/webhooks/${id}/test`).set(bearer(secret));
    // supertest sends when then() is called: start both now
    const first = [send(p.secret, mine).then((r) => r), send(p.secret, mine).then((r) => r)];
    await new Promise((r) => setTimeout(r, 200));
    const third = await send(p.secret, mine);
    expect(third.status).toBe(429);
    expect(third.body.error.message).toBe('rate_limit_exceeded');
    expect(third.headers['retry-after']).toBe('2');
    const otherProject = await send(other.secret, theirs);
    expect(otherProject.body.data.delivered).toBe(true);
    for (const r of await Promise.all(first)) expect(r.body.data.delivered).toBe(true);
    // the slots are given back
    expect((await send(p.secret, mine)).body.data.delivered).toBe(true);
  } finally {
    await new Promise((r) => slow.close(r));
  }
});
