import type { Knex } from 'knex';
import { AppError, canonicalJson, sha256Hex } from '@tes/core';

export interface PriceVersionRecord {
  version: string;
  prices: unknown;
  createdAt: string;
}

interface PriceVersionRow {
  seq: number;
  version: string;
  prices: unknown;
  content_sha256: string;
  created_at: Date;
}

export async function getCurrentPriceVersion(db: Knex): Promise<PriceVersionRecord | null> {
  const row = await db<PriceVersionRow>('price_versions').select('version', 'prices', 'created_at').orderBy('seq', 'desc').first();
  return row ? { version: row.version, prices: row.prices, createdAt: new Date(row.created_at).toISOString() } : null;
}

export async function getPriceVersion(db: Knex, version: string): Promise<PriceVersionRecord | null> {
  const row = await db<PriceVersionRow>('price_versions').select('version', 'prices', 'created_at').where({ version }).first();
  return row ? { version: row.version, prices: row.prices, createdAt: new Date(row.created_at).toISOString() } : null;
}

/**
 * Publishes a price list. Content equal to the current list keeps the current version;
 * any change of content gives a new version `YYYY-MM-DD.N`. Serialized by an advisory lock
 * so two operators publishing at once cannot mint the same version. With `expectVersion`
 * (null: none published yet) it is a compare-and-set: under the same lock, a current version
 * other than the expected one refuses with price_version_mismatch and publishes nothing.
 */
export async function publishPrices(
  db: Knex,
  prices: unknown,
  options: { now?: Date; expectVersion?: string | null } = {},
): Promise<{ priceVersion: string; created: boolean }> {
  const hash = sha256Hex(canonicalJson(prices));
  const now = options.now ?? new Date();
  return db.transaction(async (trx) => {
    await trx.raw("SELECT pg_advisory_xact_lock(hashtext('tes.publish_prices'))");
    const current = await trx<PriceVersionRow>('price_versions').select('version', 'content_sha256').orderBy('seq', 'desc').first();
    if (options.expectVersion !== undefined && (current?.version ?? null) !== options.expectVersion) {
      throw new AppError('price_version_mismatch', `the current price version is ${current?.version ?? 'none'}, not ${options.expectVersion ?? 'none'}`, {
        details: { currentVersion: current?.version ?? null },
      });
    }
    if (current?.content_sha256 === hash) return { priceVersion: current.version, created: false };
    const day = now.toISOString().slice(0, 10);
    const sameDay = await trx('price_versions').count<{ n: string }[]>({ n: '*' }).where('version', 'like', `${day}.%`);
    const version = `${day}.${Number(sameDay[0]?.n ?? 0) + 1}`;
    await trx('price_versions').insert({ version, content_sha256: hash, prices: JSON.stringify(prices) });
    return { priceVersion: version, created: true };
  });
}

export async function getExecutionEnabled(db: Knex): Promise<boolean> {
  const row = await db<{ key: string; value: unknown }>('settings').select('value').where({ key: 'execution_enabled' }).first();
  return row ? row.value === true : true;
}

export async function setExecutionEnabled(db: Knex, enabled: boolean): Promise<void> {
  await db('settings')
    .insert({ key: 'execution_enabled', value: JSON.stringify(enabled), updated_at: db.fn.now() })
    .onConflict('key')
    .merge();
}

export interface CapabilityReport {
  tool: string;
  model: string;
  available: boolean;
  missing: string[];
}

export async function reportCapabilities(db: Knex, workerId: string, reports: CapabilityReport[]): Promise<void> {
  if (reports.length === 0) return;
  await db('tool_capabilities')
    .insert(reports.map((r) => ({ tool: r.tool, model: r.model, available: r.available, missing: r.missing, reported_by: workerId, reported_at: db.fn.now() })))
    .onConflict(['tool', 'model'])
    .merge();
}

/** "tool:model" keys the latest worker reports say cannot run. */
export async function getUnavailableModels(db: Knex): Promise<Set<string>> {
  const rows = await db('tool_capabilities').select('tool', 'model').where({ available: false });
  return new Set(rows.map((r: { tool: string; model: string }) => `${r.tool}:${r.model}`));
}
