import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { Catalog } from '@tes/catalog';
import { loadConfig } from '@tes/config';
import { AmqpClient, deleteTopology, topologyNames } from '@tes/messaging';
import { createLogger } from '@tes/observability';
import { CaptureTransport, useTestDatabase } from '@tes/testing';
import { startRelay } from '../src/server';

/**
 * A relay whose start fails at its last step (the operations port is taken) stops what it had
 * started before the error reaches the caller: no database connection, broker connection or
 * timer is left behind. Its broker traffic goes through a counting TCP proxy to the real
 * RabbitMQ, so the test sees the connection open and close.
 */
const AMQP = new URL(process.env.TEST_AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672');
const { db, database } = useTestDatabase({ poolMax: 1 });

/** A TCP proxy to the broker that counts the connections it carried and those still open. */
async function countingProxy() {
  const open = new Set<net.Socket>();
  let accepted = 0;
  const server = net.createServer((client) => {
    accepted += 1;
    open.add(client);
    const upstream = net.connect(Number(AMQP.port || 5672), AMQP.hostname);
    for (const s of [client, upstream]) s.on('error', () => undefined);
    client.on('close', () => (open.delete(client), upstream.destroy()));
    upstream.on('close', () => client.destroy());
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const url = new URL(AMQP);
  url.hostname = '127.0.0.1';
  url.port = String((server.address() as net.AddressInfo).port);
  return {
    url: url.toString(),
    accepted: () => accepted,
    open: () => open.size,
    close: () => new Promise<void>((r) => (open.forEach((s) => s.destroy()), server.close(() => r()))),
  };
}

it('a start that fails at its last step leaves no connection, pool or timer behind', async () => {
  const taken = net.createServer();
  await new Promise<void>((r) => taken.listen(0, '0.0.0.0', () => r()));
  const proxy = await countingProxy();
  const prefix = `test.relaystart.${randomBytes(3).toString('hex')}.`;
  const config = loadConfig({
    DATABASE_URL: database.url,
    AMQP_URL: proxy.url,
    AMQP_PREFIX: prefix,
    METRICS_PORT: String((taken.address() as net.AddressInfo).port),
    ENABLE_TEST_TOOLS: '1',
  });
  const logs = new CaptureTransport();
  try {
    await expect(startRelay(config, createLogger({ service: 'test', transports: [logs] }))).rejects.toMatchObject({ code: 'EADDRINUSE' });
    // it had got as far as the broker and the database
    expect(proxy.accepted()).toBeGreaterThanOrEqual(1);
    const deadline = Date.now() + 2_000;
    while (proxy.open() > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(proxy.open()).toBe(0);
    const pool = await db.raw<{ rows: { n: number }[] }>(
      `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = :name AND application_name = 'tes-relay'`,
      { name: database.name },
    );
    expect(pool.rows[0]?.n).toBe(0);
    expect(logs.records.filter((r) => r.message === 'process.start.cleanup_failed')).toEqual([]);
  } finally {
    await proxy.close();
    await new Promise<void>((r) => taken.close(() => r()));
    const cleanup = new AmqpClient({ url: AMQP.toString(), logger: createLogger({ service: 'test', silent: true }), name: 'test-cleanup' });
    await cleanup.addSetup(async (conn) => {
      const ch = await conn.createChannel();
      await deleteTopology(ch, topologyNames(prefix, config.waitRecheckMs), new Catalog({ enableTestTools: true }).categories());
      await ch.close();
    });
    await cleanup.start();
    await cleanup.stop();
  }
});
