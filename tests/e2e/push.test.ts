import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { verifyWebhook } from '@tes/client';
import { createWebhookEndpoint, listWebhookDeliveries } from '@tes/db';
import { startGateway, type RunningGateway } from '../../services/gateway/src/server';
import { bearer, useStack, waitForExecution } from '../stack';
import { openEvents } from '../sse';

/**
 * Results without polling (issue #13): Prefer: wait, the event stream across gateways and a
 * gateway restart, and webhooks to a receiver that fails and recovers, verified with the SDK's
 * verifyWebhook (code of its own, not the relay's signer).
 */
const stack = useStack({ env: { WEBHOOK_ALLOW_PRIVATE: '1', WEBHOOK_RETRY_DELAYS_MS: '200,200,200,200' } });

async function quoteAndSubmit(secret: string, tool: string, args: Record<string, unknown>, key: string, headers: Record<string, string> = {}) {
  const q = await stack.http().post('/tools/quote').set(bearer(secret)).send({ tool, arguments: args });
  expect(q.status).toBe(200);
  const started = Date.now();
  const res = await stack
    .http()
    .post(`/tools/${tool}`)
    .set({ ...bearer(secret), 'Idempotency-Key': key, ...headers })
    .send({ tool, arguments: args, priceVersion: q.body.data.priceVersion, maximumChargeMicros: q.body.data.maximumChargeMicros });
  return { res, ms: Date.now() - started };
}

const sleepArgs = (seconds: number, steps = 2) => ({ seconds, steps, costMicrosPerStep: 10 });

async function stopGateway(g: RunningGateway): Promise<void> {
  for (const p of g.parts) await p.stop();
}

describe('Prefer: wait', () => {
  it('a submit that ends within the wait is answered 200 with the result, at once when it ends', async () => {
    const p = await stack.seed({ creditMicros: 1_000_000 });
    const args = { text: 'wait', width: 256, height: 256, format: 'png' };
    const { res, ms } = await quoteAndSubmit(p.secret, 'image.render', args, 'wait-render-1', { Prefer: 'wait=10' });
    expect(res.status).toBe(200);
    expect(res.headers['preference-applied']).toBe('wait=10');
    expect(res.body.data.status).toBe('succeeded');
    expect(res.body.data.output.artifacts).toHaveLength(1);
    expect(ms).toBeLessThan(5_000); // the 202's Retry-After alone would be 5 s
    // a replay honours it too
    const again = await quoteAndSubmit(p.secret, 'image.render', args, 'wait-render-1', { Prefer: 'respond-async, wait=5' });
    expect(again.res.status).toBe(200);
    expect(again.res.headers['idempotent-replayed']).toBe('true');
    expect(again.res.headers['preference-applied']).toBe('wait=5');
    expect(again.res.body.data.id).toBe(res.body.data.id);
  });

  it('one that does not end in time gets the usual answer with the state at the end of the wait', async () => {
    const p = await stack.seed({ creditMicros: 1_000_000 });
    const { res, ms } = await quoteAndSubmit(p.secret, 'test.sleep', sleepArgs(1.5), 'wait-sleep-1', { Prefer: 'wait=1' });
    expect(res.status).toBe(202);
    expect(res.headers['retry-after']).toBe('5');
    expect(res.headers['preference-applied']).toBeUndefined();
    expect(ms).toBeGreaterThanOrEqual(1_000);
    expect(ms).toBeLessThan(2_500);
    expect(['running', 'queued']).toContain(res.body.data.status);
    const id = res.body.data.id as string;
    // GET: waits for the end (here about 2 s more); a wait larger than 60 is treated as 60
    const started = Date.now();
    const got = await stack
      .http()
      .get(`/tools/executions/${id}`)
      .set({ ...bearer(p.secret), Prefer: 'wait=600' });
    expect(got.status).toBe(200);
    expect(got.body.data.status).toBe('succeeded');
    expect(got.headers['preference-applied']).toBe('wait=60');
    expect(Date.now() - started).toBeLessThan(10_000);
    // nonsense is ignored: answered at once, as without the header
    const plain = await stack
      .http()
      .get(`/tools/executions/${id}`)
      .set({ ...bearer(p.secret), Prefer: 'wait=soon' });
    expect(plain.status).toBe(200);
    expect(plain.headers['preference-applied']).toBeUndefined();
  });
});

describe('GET /tools/executions/{id}/events', () => {
  it('streams every change from another gateway than the one that took the submit, and ends after the terminal event', async () => {
    const p = await stack.seed({ creditMicros: 1_000_000 });
    const other = await startGateway(stack.config, stack.logger);
    try {
      const { res } = await quoteAndSubmit(p.secret, 'test.sleep', sleepArgs(0.4, 3), 'stream-1');
      expect(res.status).toBe(202);
      const id = res.body.data.id as string;
      const stream = await openEvents(`http://127.0.0.1:${other.port}/tools/executions/${id}/events`, bearer(p.secret));
      expect(stream.status).toBe(200);
      expect(stream.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
      expect(stream.headers.get('cache-control')).toBe('no-store');
      await stream.next(1, 2_000); // the current state, at once
      await stream.ended;
      const events = stream.events;
      expect(events.every((e) => e.event === 'execution')).toBe(true);
      const ids = events.map((e) => Number(e.id));
      expect(ids).toEqual([...ids].sort((a, b) => a - b));
      expect(new Set(ids).size).toBe(ids.length);
      const last = events.at(-1)!.data;
      expect(last.status).toBe('succeeded');
      expect(events.filter((e) => e.data.status === 'succeeded')).toHaveLength(1);
      // each step's start and end was an event: completed steps go 0, 1, 2, 3 (none skipped)
      const completed = [...new Set(events.map((e) => (e.data.progress as { completedSteps: number }).completedSteps))];
      expect(completed).toEqual([0, 1, 2, 3]);
      // the last event is exactly what GET returns
      const got = await stack.http().get(`/tools/executions/${id}`).set(bearer(p.secret));
      expect(last).toEqual(got.body.data);
    } finally {
      await stopGateway(other);
    }
  });

  it('resumes with Last-Event-ID on a gateway started after the first one stopped mid-stream', async () => {
    const p = await stack.seed({ creditMicros: 1_000_000 });
    let g = await startGateway(stack.config, stack.logger);
    const { res } = await quoteAndSubmit(p.secret, 'test.sleep', sleepArgs(0.8, 3), 'stream-restart');
    const id = res.body.data.id as string;
    const first = await openEvents(`http://127.0.0.1:${g.port}/tools/executions/${id}/events`, bearer(p.secret));
    await first.next(2);
    await stopGateway(g); // ends its streams at once
    await first.ended;
    const lastSeen = first.events.at(-1)!;
    expect(lastSeen.data.status).not.toBe('succeeded');
    g = await startGateway(stack.config, stack.logger);
    try {
      const resumed = await openEvents(`http://127.0.0.1:${g.port}/tools/executions/${id}/events`, { ...bearer(p.secret), 'Last-Event-ID': lastSeen.id! });
      await resumed.ended;
      expect(resumed.events.length).toBeGreaterThan(0);
      expect(resumed.events.every((e) => Number(e.id) > Number(lastSeen.id))).toBe(true);
      expect(resumed.events.at(-1)!.data.status).toBe('succeeded');
      // resuming from the terminal event: nothing more to say, the stream just ends
      const done = await openEvents(`http://127.0.0.1:${g.port}/tools/executions/${id}/events`, {
        ...bearer(p.secret),
        'Last-Event-ID': resumed.events.at(-1)!.id!,
      });
      await done.ended;
      expect(done.events).toEqual([]);
    } finally {
      await stopGateway(g);
    }
  });

  it("another project's execution is 404, with the error envelope", async () => {
    const a = await stack.seed({ creditMicros: 1_000_000 });
    const b = await stack.seed();
    const { res } = await quoteAndSubmit(a.secret, 'test.sleep', sleepArgs(0, 1), 'stream-bola');
    const r = await fetch(`${stack.baseUrl}/tools/executions/${res.body.data.id as string}/events`, { headers: bearer(b.secret) });
    expect(r.status).toBe(404);
    expect(((await r.json()) as { error: { message: string } }).error.message).toBe('execution_not_found');
  });
});

describe('a gateway stopping', () => {
  it('closes a kept-alive connection once the answer in flight at the stop is out, instead of holding it open until the deadline', async () => {
    const p = await stack.seed({ creditMicros: 1_000_000 });
    const g = await startGateway(stack.config, stack.logger);
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    // a quote whose body is still on its way when the stop is asked: its connection is busy
    // then, so server.close() leaves it, and Node answers it keep-alive
    const body = JSON.stringify({ tool: 'test.sleep', arguments: { seconds: 0, steps: 1, costMicrosPerStep: 1 } });
    let finish = (): void => undefined;
    const answer = new Promise<{ status: number; connection: string | undefined }>((resolve, reject) => {
      const req = http.request(
        `http://127.0.0.1:${g.port}/tools/quote`,
        { method: 'POST', agent, headers: { ...bearer(p.secret), 'Content-Type': 'application/json', 'Content-Length': String(Buffer.byteLength(body)) } },
        (res) => {
          res.resume();
          res.on('end', () => resolve({ status: res.statusCode ?? 0, connection: res.headers.connection }));
        },
      );
      req.on('error', reject);
      req.write(body.slice(0, 10));
      finish = () => req.end(body.slice(10));
    });
    try {
      await new Promise((r) => setTimeout(r, 200)); // the request's head is in
      // its HTTP part's stop, asked while the request is in flight (the parts before it end
      // the streams and waits: they take their own time)
      const stopping = g.parts
        .find((part) => part.name === 'http')!
        .stop()
        .then(() => 'stopped');
      await new Promise((r) => setTimeout(r, 300)); // the stop is under way
      finish();
      expect(await answer).toEqual({ status: 200, connection: 'keep-alive' });
      // the connection is idle now: the gateway closes it, far below the 10 s deadline (the
      // keep-alive timeout, 65 s, would otherwise end it)
      const stopped = await Promise.race([stopping, new Promise((r) => setTimeout(() => r('still open after 3 s'), 3_000))]);
      expect(stopped).toBe('stopped');
    } finally {
      agent.destroy();
      await stopGateway(g);
    }
  });

  it("closes connections that have sent no whole request (a browser's preconnect, a head on its way): they held the stop until its deadline", async () => {
    const g = await startGateway(stack.config, stack.logger);
    const open = (head: string) =>
      new Promise<net.Socket>((resolve, reject) => {
        const socket = net.connect(g.port, '127.0.0.1', () => {
          if (head) socket.write(head);
          resolve(socket);
        });
        socket.on('error', reject);
      });
    const preconnected = await open('');
    const halfway = await open('GET /tools/project HTTP/1.1\r\nHost: 127.0.0.1\r\n');
    const closed = (s: net.Socket) => new Promise<void>((r) => (s.destroyed ? r() : s.once('close', () => r())));
    try {
      await new Promise((r) => setTimeout(r, 100)); // both are accepted
      const stopping = g.parts
        .find((part) => part.name === 'http')!
        .stop()
        .then(() => 'stopped');
      const stopped = await Promise.race([stopping, new Promise((r) => setTimeout(() => r('still open after 3 s'), 3_000))]);
      expect(stopped).toBe('stopped');
      await Promise.all([closed(preconnected), closed(halfway)]);
    } finally {
      preconnected.destroy();
      halfway.destroy();
      await stopGateway(g);
    }
  });
});

describe('webhooks', () => {
  it('a receiver that answers 500, then recovers, gets each event once delivered, signed, the same id on every attempt', async () => {
    const p = await stack.seed({ creditMicros: 1_000_000 });
    const got: { headers: http.IncomingHttpHeaders; body: string }[] = [];
    let failing = true;
    const server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        got.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
        res.writeHead(failing ? 500 : 204).end();
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const endpoint = await createWebhookEndpoint(stack.db, { projectId: p.projectId, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/tes` });
      const { res } = await quoteAndSubmit(p.secret, 'test.sleep', sleepArgs(0, 1), 'hook-0001');
      const id = res.body.data.id as string;
      await waitForExecution(stack, p.secret, id);
      const until = Date.now() + 10_000;
      while (got.length < 2 && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
      failing = false;
      while ((await listWebhookDeliveries(stack.db, id))[0]?.status !== 'delivered' && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
      const [row] = await listWebhookDeliveries(stack.db, id);
      expect(row).toMatchObject({ status: 'delivered', lastStatusCode: 204 });
      expect(got.length).toBe(row!.attempts);
      expect(new Set(got.map((g) => g.headers['webhook-id'])).size).toBe(1);
      for (const g of got) {
        const event = verifyWebhook(endpoint.secret, g.headers as Record<string, string>, g.body);
        expect(event.type).toBe('execution.succeeded');
        expect(event.data.id).toBe(id);
      }
      const final = await stack.http().get(`/tools/executions/${id}`).set(bearer(p.secret));
      expect(JSON.parse(got.at(-1)!.body).data).toEqual(final.body.data);
      // the secret and the signature never reach the logs
      const logged = JSON.stringify(stack.logs.records);
      expect(logged).not.toContain(endpoint.secret);
      expect(logged).not.toContain(String(got[0]!.headers['webhook-signature']).slice(3));
    } finally {
      await new Promise((r) => server.close(r));
    }
  });
});
