import type { Knex } from 'knex';
import type { Catalog } from '@tes/catalog';
import type { Config } from '@tes/config';
import type { Role, Scope } from '@tes/core';
import type { Logger, Metrics } from '@tes/observability';
import type { ObjectStore } from '@tes/storage';
import type { OutboxDispatcher } from '@tes/messaging';
import type { ChangeHub } from './push/change-hub';
import type { HeldConnections } from './push/held-connections';
import type { KeyCache } from './key-cache';
import type { SettingsCache } from './settings-cache';
import type { UsageCounter } from './usage-counter';

export interface GatewayDeps {
  config: Config;
  db: Knex;
  catalog: Catalog;
  store: ObjectStore;
  dispatcher: OutboxDispatcher;
  /** Wakes waiting requests and event streams when an execution changes (any process). */
  changes: ChangeHub;
  /** This process's event streams and waits, bounded per project, organization and process. */
  held: HeldConnections;
  settings: SettingsCache;
  keys: KeyCache;
  usage: UsageCounter;
  logger: Logger;
  metrics: Metrics;
}

/** The authenticated caller, set by the auth middleware. */
export interface AuthContext {
  keyId: string;
  /** The key's lookup id (KeyCache: open streams and waits watch it for a revocation). */
  lookupId: string;
  keyName: string;
  projectId: string;
  organizationId: string;
  scopes: readonly Scope[];
  role: Role;
}
