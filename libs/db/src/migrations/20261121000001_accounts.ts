import type { Knex } from 'knex';

/** Organizations, projects (balances, monthly cap) and API keys. */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE TABLE organizations (
      id          text PRIMARY KEY,
      name        text NOT NULL,
      created_at  timestamptz NOT NULL DEFAULT now()
    );

    -- One row per project holds every number a submit must check atomically: the balance,
    -- the reservations and this month's charges against the cap. Keeping them on one row
    -- means a single conditional UPDATE decides acceptance with no race (no read-then-write).
    CREATE TABLE projects (
      id                    text PRIMARY KEY,
      organization_id       text NOT NULL REFERENCES organizations(id),
      name                  text NOT NULL,
      available_micros      bigint NOT NULL DEFAULT 0 CHECK (available_micros >= 0),
      reserved_micros       bigint NOT NULL DEFAULT 0 CHECK (reserved_micros >= 0),
      monthly_cap_micros    bigint CHECK (monthly_cap_micros >= 0),
      cap_month             date NOT NULL DEFAULT date_trunc('month', now() AT TIME ZONE 'utc')::date,
      month_charged_micros  bigint NOT NULL DEFAULT 0 CHECK (month_charged_micros >= 0),
      created_at            timestamptz NOT NULL DEFAULT now()
    );
    CREATE INDEX projects_organization_idx ON projects (organization_id);

    CREATE TABLE api_keys (
      id          text PRIMARY KEY,
      project_id  text NOT NULL REFERENCES projects(id),
      name        text NOT NULL,
      lookup_id   text NOT NULL UNIQUE,
      digest      bytea NOT NULL,            -- sha256 of the whole secret; the secret is never stored
      scopes      text[] NOT NULL,
      role        text NOT NULL CHECK (role IN ('ADMIN', 'MEMBER')),
      expires_at  timestamptz,
      revoked_at  timestamptz,
      created_at  timestamptz NOT NULL DEFAULT now()
    );
    CREATE INDEX api_keys_project_idx ON api_keys (project_id);
  `);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP TABLE api_keys; DROP TABLE projects; DROP TABLE organizations;');
}
