import type { Knex } from 'knex';
import type { PriceList } from '@tes/catalog';
import { DEFAULT_PRICE_LIST, utcDay } from '@tes/catalog';
import { databaseTime, getCurrentPriceVersion, getExecutionEnabled, getUnavailableModels, publishPrices } from '@tes/db';

export interface CurrentSettings {
  priceVersion: string;
  prices: PriceList;
  executionEnabled: boolean;
  /** Models the workers reported they cannot run ("tool:model"). */
  unavailable: ReadonlySet<string>;
  /**
   * The database's UTC day (tes_now()), the day a model's retirement is compared with: one
   * clock for every gateway, read with the settings (so up to their TTL late at midnight).
   */
  today: string;
}

/**
 * Operator settings (current price list, execution switch), read from Postgres at most once
 * per TTL and shared by concurrent callers, so a publish reaches every gateway within the
 * TTL without a query per request.
 */
export class SettingsCache {
  private value: CurrentSettings | undefined;
  private loadedAt = 0;
  private loading: Promise<CurrentSettings> | undefined;

  constructor(
    private readonly db: Knex,
    private readonly ttlMs: number,
  ) {}

  async get(): Promise<CurrentSettings> {
    if (this.value && Date.now() - this.loadedAt < this.ttlMs) return this.value;
    this.loading ??= this.load().finally(() => {
      this.loading = undefined;
    });
    return this.loading;
  }

  private async load(): Promise<CurrentSettings> {
    let current = await getCurrentPriceVersion(this.db);
    if (!current) {
      // A fresh installation: publish the built-in list so quotes have a version.
      await publishPrices(this.db, DEFAULT_PRICE_LIST);
      current = await getCurrentPriceVersion(this.db);
    }
    const [executionEnabled, unavailable, now] = await Promise.all([getExecutionEnabled(this.db), getUnavailableModels(this.db), databaseTime(this.db)]);
    this.value = { priceVersion: current!.version, prices: current!.prices as PriceList, executionEnabled, unavailable, today: utcDay(now) };
    this.loadedAt = Date.now();
    return this.value;
  }
}
