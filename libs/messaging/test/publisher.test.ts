import { randomBytes } from 'node:crypto';
import amqp from 'amqplib';
import { createNullLogger } from '@tes/observability';
import { AmqpClient, ConfirmPublisher, declareTopology, deleteTopology, topologyNames } from '../src';

/**
 * A publisher whose channel the broker closes while the connection stays up (here: a publish to
 * an exchange that was deleted, 404 NOT_FOUND) opens a new channel for the next publish, instead
 * of refusing every publish until the whole connection drops. Real RabbitMQ over a socket.
 */
const AMQP_URL = process.env.TEST_AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672';

it('a channel the broker closed is opened again for the next publish', async () => {
  const names = topologyNames(`test.pub.${randomBytes(4).toString('hex')}.`);
  const admin = await amqp.connect(AMQP_URL);
  const adminCh = await admin.createChannel();
  await declareTopology(adminCh, names, ['c']);
  const client = new AmqpClient({ url: AMQP_URL, logger: createNullLogger(), name: 'test-publisher' });
  const publisher = new ConfirmPublisher(client, names.exchange, createNullLogger());
  await publisher.start();
  await client.start();
  try {
    await publisher.publish('c', { n: 1 }, { messageId: 'm1' });
    await adminCh.deleteExchange(names.exchange);
    await expect(publisher.publish('c', { n: 2 }, { messageId: 'm2' })).rejects.toThrow();
    await declareTopology(adminCh, names, ['c']); // the exchange is back
    await publisher.publish('c', { n: 3 }, { messageId: 'm3' });
    await publisher.publish('c', { n: 4 }, { messageId: 'm4' });
    expect((await adminCh.checkQueue(names.queueFor('c'))).messageCount).toBe(3);
  } finally {
    await client.stop();
    await deleteTopology(adminCh, names, ['c']);
    await admin.close();
  }
});
