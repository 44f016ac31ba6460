import type { Knex } from 'knex';

/**
 * Per-key request counters shared by every gateway replica, in the layout
 * rate-limiter-flexible's RateLimiterPostgres reads and writes (key, points, expire in ms).
 * Created here rather than by the library so the schema has one owner; expired rows are
 * deleted by the relay's janitor.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE TABLE rate_limits (
      key     varchar(255) PRIMARY KEY,
      points  integer NOT NULL DEFAULT 0,
      expire  bigint
    );
    CREATE INDEX rate_limits_expire_idx ON rate_limits (expire);
  `);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP TABLE rate_limits;');
}
