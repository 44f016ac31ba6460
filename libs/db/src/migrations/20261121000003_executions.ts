import type { Knex } from 'knex';

/** Executions, their steps and their artifacts; uploaded files. */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE TABLE files (
      id            text PRIMARY KEY,
      project_id    text NOT NULL REFERENCES projects(id),
      sha256        text NOT NULL,
      format        text NOT NULL,
      mime_type     text NOT NULL,
      size_bytes    bigint NOT NULL,
      storage_key   text NOT NULL,
      expires_at    timestamptz NOT NULL,
      deleted_at    timestamptz,
      created_at    timestamptz NOT NULL DEFAULT now(),
      UNIQUE (project_id, sha256)
    );
    CREATE INDEX files_expiry_idx ON files (expires_at) WHERE deleted_at IS NULL;

    CREATE TABLE executions (
      id                text PRIMARY KEY,
      project_id        text NOT NULL REFERENCES projects(id),
      api_key_id        text NOT NULL REFERENCES api_keys(id),
      tool              text NOT NULL,
      model             text NOT NULL,
      category          text NOT NULL,
      status            text NOT NULL CHECK (status IN
                          ('queued','running','waiting','succeeded','failed','cancelled','needs_review')),
      arguments         jsonb NOT NULL,
      price_version     text NOT NULL,
      total_steps       integer NOT NULL CHECK (total_steps >= 0),
      reserved_micros   bigint NOT NULL CHECK (reserved_micros >= 0),
      charged_micros    bigint NOT NULL DEFAULT 0 CHECK (charged_micros >= 0 AND charged_micros <= reserved_micros),
      cancel_requested  boolean NOT NULL DEFAULT false,
      -- The idempotency binding lives as long as the execution (docs/api.md#submit-post-toolstool).
      idempotency_key   text NOT NULL,
      request_digest    text NOT NULL,
      output            jsonb,
      error_code        text,
      error_message     text,
      lease_owner       text,
      lease_expires_at  timestamptz,
      attempts          integer NOT NULL DEFAULT 0,
      created_at        timestamptz NOT NULL DEFAULT now(),
      started_at        timestamptz,
      finished_at       timestamptz,
      settled_at        timestamptz,
      updated_at        timestamptz NOT NULL DEFAULT now(),
      UNIQUE (project_id, idempotency_key)
    );
    -- Listing is newest first per project; ids are time-sortable, so id DESC is creation order.
    CREATE INDEX executions_project_list_idx ON executions (project_id, id DESC);
    CREATE INDEX executions_project_status_idx ON executions (project_id, status, id DESC);
    CREATE INDEX executions_project_tool_idx ON executions (project_id, tool, id DESC);
    -- The lease reaper scans only live executions.
    CREATE INDEX executions_lease_idx ON executions (lease_expires_at) WHERE status IN ('running', 'queued');

    CREATE TABLE execution_steps (
      execution_id   text NOT NULL REFERENCES executions(id),
      project_id     text NOT NULL,
      index          integer NOT NULL CHECK (index >= 0),
      name           text NOT NULL,
      status         text NOT NULL CHECK (status IN ('running','succeeded','failed','cancelled')),
      cost_micros    bigint NOT NULL DEFAULT 0 CHECK (cost_micros >= 0),
      external_ref   text,
      checkpoint     jsonb,
      error_code     text,
      attempts       integer NOT NULL DEFAULT 1,
      started_at     timestamptz NOT NULL DEFAULT now(),
      finished_at    timestamptz,
      PRIMARY KEY (execution_id, index)
    );

    CREATE TABLE artifacts (
      id            text PRIMARY KEY,
      execution_id  text NOT NULL REFERENCES executions(id),
      project_id    text NOT NULL,
      step_index    integer NOT NULL,
      format        text NOT NULL,
      mime_type     text NOT NULL,
      size_bytes    bigint NOT NULL,
      sha256        text NOT NULL,
      storage_key   text NOT NULL,
      file_name     text NOT NULL,
      expires_at    timestamptz NOT NULL,
      deleted_at    timestamptz,
      created_at    timestamptz NOT NULL DEFAULT now()
    );
    CREATE INDEX artifacts_execution_idx ON artifacts (execution_id);
    CREATE INDEX artifacts_expiry_idx ON artifacts (expires_at) WHERE deleted_at IS NULL;
  `);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP TABLE artifacts; DROP TABLE execution_steps; DROP TABLE executions; DROP TABLE files;');
}
