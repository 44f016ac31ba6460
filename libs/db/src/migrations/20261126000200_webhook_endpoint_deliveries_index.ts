import type { Knex } from 'knex';

/**
 * A project reads an endpoint's recent deliveries through the API (issue #29:
 * GET /tools/webhooks/{id}/deliveries, listEndpointDeliveries): newest first, a page. Without
 * this index that read walks every delivery of the table that is still kept (up to
 * WEBHOOK_DELIVERY_RETENTION_DAYS of them); with it, one range of the endpoint's newest rows.
 *
 * Additive and built CONCURRENTLY outside a transaction, as in 20261126000050: every execution
 * that ends writes deliveries. The previous release neither reads nor needs it.
 */
export const config = { transaction: false };

export async function up(knex: Knex): Promise<void> {
  await knex.raw(`DROP INDEX CONCURRENTLY IF EXISTS webhook_deliveries_endpoint_recent_idx`);
  await knex.raw(`CREATE INDEX CONCURRENTLY webhook_deliveries_endpoint_recent_idx ON webhook_deliveries (endpoint_id, created_at DESC, id DESC)`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`DROP INDEX CONCURRENTLY IF EXISTS webhook_deliveries_endpoint_recent_idx`);
}
