import { startTcpRelay, type TcpRelay } from '@tes/testing';
import { bearer, useStack, waitForExecution } from '../stack';

/**
 * Issue #27, item 1: the gateway's /readyz required the broker, so a broker outage took every
 * gateway out of its Service (no endpoints after ~10 s) while each one still accepted work: the
 * submit commits its outbox row, and the dispatcher or the relay's sweep publishes it when the
 * broker is back. Readiness now says what the process can serve: the database. The broker's
 * state is named in /readyz's body (`degraded`) and exported as tes_broker_connected.
 *
 * Every process of the stack reaches RabbitMQ through a TCP relay the test cuts.
 */
let relay: TcpRelay | undefined;
const options = { env: {} as Record<string, string> };
beforeAll(async () => {
  relay = await startTcpRelay(process.env.TEST_AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672', 5672);
  options.env.AMQP_URL = relay.url;
});
const stack = useStack(options);
afterAll(async () => {
  await relay?.close();
});

async function readyz(): Promise<{ status: number; body: unknown }> {
  const res = await fetch(`http://127.0.0.1:${stack.gatewayMetricsPort}/readyz`);
  return { status: res.status, body: await res.json() };
}

async function brokerGauge(): Promise<string | undefined> {
  const text = await (await fetch(`http://127.0.0.1:${stack.gatewayMetricsPort}/metrics`)).text();
  return /^tes_broker_connected\{[^}]*\} (\S+)$/m.exec(text)?.[1];
}

it('a gateway stays ready through a broker outage, says it is degraded, and the work it accepted runs when the broker is back', async () => {
  expect(await readyz()).toEqual({ status: 200, body: { status: 'ready' } });
  expect(await brokerGauge()).toBe('1');
  const p = await stack.seed({ creditMicros: 10_000 });
  const priceVersion = (await stack.http().get('/tools').set(bearer(p.secret))).body.data.priceVersion;

  await relay!.cut();
  const codes: number[] = [];
  const deadline = Date.now() + 15_000;
  // the outage has been noticed once the gauge says so; every answer meanwhile is sampled
  for (;;) {
    const r = await readyz();
    codes.push(r.status);
    if ((await brokerGauge()) === '0') {
      expect(r.body).toEqual({ status: 'ready', degraded: ['broker'] });
      break;
    }
    if (Date.now() > deadline) throw new Error('the gateway never noticed the broker was gone');
    await new Promise((res) => setTimeout(res, 100));
  }
  for (let i = 0; i < 10; i++) {
    codes.push((await readyz()).status);
    await new Promise((res) => setTimeout(res, 100));
  }
  expect(codes.filter((c) => c !== 200)).toEqual([]);

  const submit = await stack
    .http()
    .post('/tools/test.sleep')
    .set({ ...bearer(p.secret), 'Idempotency-Key': 'during-broker-outage' })
    .send({ tool: 'test.sleep', arguments: { seconds: 0, steps: 1, costMicrosPerStep: 250 }, priceVersion, maximumChargeMicros: 250 });
  expect(submit.status).toBe(202);

  await relay!.restore();
  const done = await waitForExecution(stack, p.secret, submit.body.data.id, undefined, 60_000);
  expect(done.status).toBe('succeeded');
  expect(await brokerGauge()).toBe('1');
  expect(await readyz()).toEqual({ status: 200, body: { status: 'ready' } });
}, 90_000);
