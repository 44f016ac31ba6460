import net from 'node:net';
import { createLogger } from '@tes/observability';
import { CaptureTransport, startTcpRelay, type TcpRelay } from '@tes/testing';
import { AmqpClient } from '../src';
import { parseAmqpUrls, UrlRotation } from '../src/urls';

/**
 * AMQP_URL with several nodes (a cluster): the client takes them in turn, one per connect
 * attempt, so a node that is down is skipped and a lost connection is made again on the next
 * node. The "nodes" here are TCP relays in front of the real local RabbitMQ, which the test cuts
 * like a node going away, plus a port nothing listens on.
 */
const AMQP_URL = process.env.TEST_AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until(what: string, check: () => boolean, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for: ${what}`);
    await sleep(20);
  }
}

async function refusedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((r) => server.close(() => r()));
  return port;
}

describe('parseAmqpUrls and UrlRotation', () => {
  it('splits before each scheme://, trims, and keeps a comma that is part of a password', () => {
    expect(parseAmqpUrls('amqp://a:5672')).toEqual(['amqp://a:5672']);
    expect(parseAmqpUrls(' amqp://u:p@a:5672 ,amqps://u:p,q@b:5671,, amqp://c ')).toEqual(['amqp://u:p@a:5672', 'amqps://u:p,q@b:5671,', 'amqp://c']);
    expect(parseAmqpUrls(' ')).toEqual([]);
  });

  it('gives the URLs in order, round the list, and describes them without passwords', () => {
    const r = new UrlRotation('amqp://u:secret@a,amqp://u:secret@b,amqp://c');
    expect([r.next(), r.next(), r.next(), r.next()]).toEqual(['amqp://u:secret@a', 'amqp://u:secret@b', 'amqp://c', 'amqp://u:secret@a']);
    expect(r.describe()).toBe('amqp://u:***@a,amqp://u:***@b,amqp://c');
    expect(() => new UrlRotation('')).toThrow(/no AMQP URL/);
  });
});

it('with several URLs, the client skips a node that is down and reconnects on the next node when its node goes away', async () => {
  const down = `amqp://guest:guest@127.0.0.1:${await refusedPort()}`;
  const relays: TcpRelay[] = [await startTcpRelay(AMQP_URL, 5672), await startTcpRelay(AMQP_URL, 5672)];
  const [a, b] = relays as [TcpRelay, TcpRelay];
  const logs = new CaptureTransport();
  const logger = createLogger({ service: 'test', level: 'debug', transports: [logs] });
  const readyNodes = () => logs.records.filter((r) => r.message === 'amqp.connection.ready').map((r) => r.node);
  const node = (relay: TcpRelay) => `127.0.0.1:${new URL(relay.url).port}`;
  const client = new AmqpClient({ url: `${down},${a.url},${b.url}`, logger, name: 'test-urls' });
  try {
    // the first URL refuses: the start goes on to the second
    await client.start();
    expect(readyNodes()).toEqual([node(a)]);

    // node A goes away: the reconnect takes the next URL, B
    await a.cut();
    await until('the reconnect on B', () => readyNodes().length === 2);
    expect(readyNodes()[1]).toBe(node(b));
    expect(client.connected).toBe(true);

    // A is back, B goes away: round the list, past the refused one, to A
    await a.restore();
    await b.cut();
    await until('the reconnect on A', () => readyNodes().length === 3);
    expect(readyNodes()[2]).toBe(node(a));
    expect(logs.records.filter((r) => r.message === 'amqp.reconnect.failed').length).toBeGreaterThanOrEqual(1);
    // no password in any log line
    expect(logs.text()).not.toContain(':guest@');
  } finally {
    await client.stop();
    for (const r of relays) await r.close();
  }
});

it('a start that cannot reach any of the URLs names them all, without passwords', async () => {
  const ports = [await refusedPort(), await refusedPort()];
  const client = new AmqpClient({
    url: ports.map((p) => `amqp://guest:s3cret@127.0.0.1:${p}`).join(','),
    logger: createLogger({ service: 'test', silent: true }),
    name: 'test-urls-refused',
    initialTimeoutMs: 500,
  });
  const failure = await client.start().then(
    () => undefined,
    (err: unknown) => err as Error,
  );
  expect(failure?.message).toContain(`cannot connect to RabbitMQ at amqp://guest:***@127.0.0.1:${ports[0]},amqp://guest:***@127.0.0.1:${ports[1]}:`);
  expect(failure?.message).not.toContain('s3cret');
  await client.stop();
});
