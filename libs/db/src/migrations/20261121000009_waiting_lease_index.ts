import type { Knex } from 'knex';

/**
 * Waiting executions carry a "re-check due by" deadline in lease_expires_at, so the reaper
 * scans running and waiting work (queued work has no lease).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    DROP INDEX executions_lease_idx;
    CREATE INDEX executions_lease_idx ON executions (lease_expires_at) WHERE status IN ('running', 'waiting');
  `);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    DROP INDEX executions_lease_idx;
    CREATE INDEX executions_lease_idx ON executions (lease_expires_at) WHERE status IN ('running', 'queued');
  `);
}
