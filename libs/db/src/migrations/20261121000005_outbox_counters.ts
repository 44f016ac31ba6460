import type { Knex } from 'knex';

/** Transactional outbox and per-month usage counters. */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE TABLE outbox (
      id             bigserial PRIMARY KEY,
      project_id     text NOT NULL,
      execution_id   text NOT NULL,
      routing_key    text NOT NULL,
      payload        jsonb NOT NULL,
      attempts       integer NOT NULL DEFAULT 0,
      last_error     text,
      created_at     timestamptz NOT NULL DEFAULT now(),
      published_at   timestamptz
    );
    -- The relay's sweep reads only unsent rows, oldest first.
    CREATE INDEX outbox_unsent_idx ON outbox (id) WHERE published_at IS NULL;

    CREATE TABLE usage_counters (
      project_id       text NOT NULL REFERENCES projects(id),
      month            date NOT NULL,
      request_count    bigint NOT NULL DEFAULT 0,
      execution_count  bigint NOT NULL DEFAULT 0,
      charged_micros   bigint NOT NULL DEFAULT 0,
      PRIMARY KEY (project_id, month)
    );
  `);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP TABLE usage_counters; DROP TABLE outbox;');
}
