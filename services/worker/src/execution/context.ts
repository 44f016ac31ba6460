import type { Knex } from 'knex';
import type { Catalog, PriceList } from '@tes/catalog';
import { getPriceVersion } from '@tes/db';
import type { Logger, Metrics } from '@tes/observability';
import type { ObjectStore } from '@tes/storage';
import type { SharpSandbox } from '../media/sharp-sandbox';
import type { ProviderSetup } from '../providers/common';
import type { AnyRunner } from '../runner';

/** What running one claimed execution needs; the StepEngine builds it once per process. */
export interface ExecutionDeps {
  db: Knex;
  catalog: Pick<Catalog, 'get' | 'cost' | 'timeoutCost'>;
  store: ObjectStore;
  /** Runners by tool name (the worker's are typed complete by `Runners`; tests add their own). */
  runners: Readonly<Record<string, AnyRunner>>;
  logger: Logger;
  metrics: Metrics;
  leaseTtlMs: number;
  /** The longest one artifact's upload may take (ARTIFACT_PUT_TIMEOUT_MS). */
  artifactPutTimeoutMs: number;
  providers: ProviderSetup;
  sandbox: SharpSandbox;
  /** Aborted when the worker shuts down: running steps stop and their executions are given back. */
  shutdown: AbortSignal;
  /**
   * Aborted when the worker's drain begins: no new step starts (the execution is given back
   * after the step it is running, ShuttingDown); the running step goes on until `shutdown`.
   */
  draining: AbortSignal;
  /** The price list of a version. */
  prices(version: string): Promise<PriceList>;
  /** How long a waiting or released execution may go untouched before the relay re-publishes it. */
  recheckDeadlineMs: number;
}

/**
 * This run's lease is gone (expired, reaped, or claimed again, even by this same worker): it
 * must write nothing more for the execution.
 */
export class LeaseLost extends Error {
  constructor() {
    super('lease lost');
    this.name = 'LeaseLost';
  }
}

/** The worker is stopping: the execution is given back to be resumed elsewhere. */
export class ShuttingDown extends Error {
  constructor() {
    super('worker shutting down');
    this.name = 'ShuttingDown';
  }
}

/** Price lists are immutable per version, so they are cached for the process's life. */
export function cachedPriceLists(db: Knex): (version: string) => Promise<PriceList> {
  const cache = new Map<string, PriceList>();
  return async (version) => {
    const cached = cache.get(version);
    if (cached) return cached;
    const found = await getPriceVersion(db, version);
    if (!found) throw new Error(`price version ${version} not found`);
    cache.set(version, found.prices as PriceList);
    return found.prices as PriceList;
  };
}
