import type { Knex } from 'knex';

/** Versioned price lists (append-only; the newest is current) and operator switches. */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE TABLE price_versions (
      seq             bigserial PRIMARY KEY,
      version         text NOT NULL UNIQUE,
      content_sha256  text NOT NULL,
      prices          jsonb NOT NULL,
      created_at      timestamptz NOT NULL DEFAULT now()
    );

    CREATE TABLE settings (
      key         text PRIMARY KEY,
      value       jsonb NOT NULL,
      updated_at  timestamptz NOT NULL DEFAULT now()
    );
    INSERT INTO settings (key, value) VALUES ('execution_enabled', 'true');
  `);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP TABLE settings; DROP TABLE price_versions;');
}
