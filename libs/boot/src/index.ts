import { Catalog } from '@tes/catalog';
import { dbTimeoutsFor, providerAvailability, type Config, type DbRole } from '@tes/config';
import { createDb, poolStats, type Db } from '@tes/db';
import type { StartedParts } from '@tes/lifecycle';
import { AmqpClient, ConfirmPublisher, topologyNames, topologySetup, type TopologyNames } from '@tes/messaging';
import type { Logger, Metrics } from '@tes/observability';
import { ObjectStore } from '@tes/storage';

/** What every service process holds: its composition root (main.ts → server.ts) builds the rest on these. */
export interface SharedParts {
  db: Db;
  store: ObjectStore;
  catalog: Catalog;
  names: TopologyNames;
  amqp: AmqpClient;
  publisher: ConfirmPublisher;
}

export interface SharedPartsOptions {
  /** Which service: its database timeouts and its application_name (`tes-<role>`). */
  role: DbRole;
  poolMax: number;
  /** The AMQP connection's name in the management UI; `tes-<role>` when not given. */
  amqpName?: string;
}

/**
 * Opens the parts gateway, worker and relay open alike, in the order they depend on one
 * another, each joining `started` as soon as it holds something (so a start that fails stops
 * it). The topology is declared by every service: a message published before any worker
 * declared its queue would otherwise be routed nowhere and silently dropped. The AMQP client is
 * not started here: each service starts it once its own setup hooks are added.
 */
export async function openSharedParts(config: Config, logger: Logger, metrics: Metrics, started: StartedParts, o: SharedPartsOptions): Promise<SharedParts> {
  const db = createDb({ url: config.databaseUrl, poolMax: o.poolMax, applicationName: `tes-${o.role}`, timeouts: dbTimeoutsFor(config, o.role) });
  metrics.watchDbPool(() => poolStats(db));
  started.add('db', () => db.destroy());
  const store = new ObjectStore(config.s3);
  started.add('storage', () => store.close());
  const catalog = new Catalog({ enableTestTools: config.enableTestTools, providers: providerAvailability(config), retirements: config.modelRetirements });
  const names = topologyNames(config.amqpPrefix, config.waitRecheckMs);
  const amqp = new AmqpClient({ url: config.amqpUrl, logger, name: o.amqpName ?? `tes-${o.role}` });
  started.add('amqp', () => amqp.stop());
  await amqp.addSetup(topologySetup(names, catalog.categories()));
  const publisher = new ConfirmPublisher(amqp, names.exchange, logger);
  await publisher.start();
  return { db, store, catalog, names, amqp, publisher };
}
