import type { Channel, ChannelModel } from 'amqplib';

/**
 * Broker topology, declared in one place and replayed on every (re)connect.
 *
 *   <p>tes.executions (direct) --category--> <p>executions.<category>  (quorum)
 *   <p>executions.<category> --dead-letter--> <p>tes.dlx (fanout) --> <p>executions.dead (quorum)
 *
 * RabbitMQ 3.10 quorum queues have no default delivery limit, so x-delivery-limit is set
 * here: a message that keeps failing (a poison message or a crash loop) is dead-lettered
 * instead of looping forever. Arguments must never change for an existing queue (the broker
 * refuses a redeclare with other arguments); a new policy needs a new queue name.
 *
 * Every queue is a quorum queue, the delay lines too: on a cluster, a classic durable queue
 * lives on one node, and while that node is down every redeclare of it fails (404 "home node
 * … is down"), so no service could replay its topology and reconnect to the other nodes
 * (seen in tests/faults/broker-node-loss.faults.ts). The delay lines were classic queues named
 * `<p>executions.<category>.wait.<ms>` (routing key `<category>.wait.<ms>`); they dead-letter
 * what they hold into the work queue within <ms>, and can then be deleted.
 */
export const DELIVERY_LIMIT = 5;

export interface TopologyNames {
  exchange: string;
  deadLetterExchange: string;
  deadLetterQueue: string;
  /** Re-check delay (ms) of the delay queues; part of their names, since a queue's TTL cannot change. */
  waitMs: number;
  queueFor(category: string): string;
  waitQueueFor(category: string): string;
  /** Routing key that reaches a category's wait queue on the executions exchange. */
  waitRoutingKey(category: string): string;
}

const DEFAULT_WAIT_MS = 5_000;

export function topologyNames(prefix: string, waitMs: number = DEFAULT_WAIT_MS): TopologyNames {
  return {
    exchange: `${prefix}tes.executions`,
    deadLetterExchange: `${prefix}tes.dlx`,
    deadLetterQueue: `${prefix}executions.dead`,
    waitMs,
    queueFor: (category: string) => `${prefix}executions.${category}`,
    waitQueueFor: (category: string) => `${prefix}executions.${category}.delay.${waitMs}`,
    waitRoutingKey: (category: string) => `${category}.delay.${waitMs}`,
  };
}

export async function declareTopology(ch: Channel, names: TopologyNames, categories: readonly string[]): Promise<void> {
  await ch.assertExchange(names.exchange, 'direct', { durable: true });
  await ch.assertExchange(names.deadLetterExchange, 'fanout', { durable: true });
  await ch.assertQueue(names.deadLetterQueue, { durable: true, arguments: { 'x-queue-type': 'quorum' } });
  await ch.bindQueue(names.deadLetterQueue, names.deadLetterExchange, '');
  for (const category of categories) {
    const queue = names.queueFor(category);
    await ch.assertQueue(queue, {
      durable: true,
      arguments: {
        'x-queue-type': 'quorum',
        'x-delivery-limit': DELIVERY_LIMIT,
        'x-dead-letter-exchange': names.deadLetterExchange,
      },
    });
    await ch.bindQueue(queue, names.exchange, category);
    // The delay line for provider re-checks: messages sit for waitMs, then the broker
    // dead-letters them back to the category's work queue. Every message has the same TTL, so
    // expiry at the head is in order. Quorum (3.10 supports TTL and dead-lettering on them):
    // replicated, and declarable while any node is down (see above).
    const wait = names.waitQueueFor(category);
    await ch.assertQueue(wait, {
      durable: true,
      arguments: {
        'x-queue-type': 'quorum',
        'x-message-ttl': names.waitMs,
        'x-dead-letter-exchange': names.exchange,
        'x-dead-letter-routing-key': category,
      },
    });
    await ch.bindQueue(wait, names.exchange, names.waitRoutingKey(category));
  }
}

/** Removes a prefixed topology (tests clean up their own queues). */
export async function deleteTopology(ch: Channel, names: TopologyNames, categories: readonly string[]): Promise<void> {
  for (const category of categories) {
    await ch.deleteQueue(names.queueFor(category));
    await ch.deleteQueue(names.waitQueueFor(category));
  }
  await ch.deleteQueue(names.deadLetterQueue);
  await ch.deleteExchange(names.exchange);
  await ch.deleteExchange(names.deadLetterExchange);
}

/** A setup hook that (re)declares the topology on every connect. */
export function topologySetup(names: TopologyNames, categories: readonly string[]): (conn: ChannelModel) => Promise<void> {
  return async (conn) => {
    const ch = await conn.createChannel();
    await declareTopology(ch, names, categories);
    await ch.close();
  };
}
