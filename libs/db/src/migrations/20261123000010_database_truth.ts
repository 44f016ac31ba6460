import type { Knex } from 'knex';

/**
 * The database is the only source of truth (issue #11):
 *
 * - tes_now(): the one clock every deadline, expiry and month in our SQL is read from. In
 *   production it is now(); a test may redefine it (CREATE OR REPLACE) to move the database's
 *   time across a month boundary or past a deadline. Cached plans that inlined it are
 *   invalidated by the redefinition (plancache tracks inlined SQL functions).
 * - tes_month(): the first day of tes_now()'s UTC month, the cap and usage period key, so
 *   no process clock decides which month a charge belongs to.
 * - Every execution open for work carries a deadline in lease_expires_at by which someone must
 *   have touched it: queued (dispatch deadline), running (the lease, or a hand-back's grace),
 *   waiting (re-check due). The relay re-publishes whatever is past it, so a lost message
 *   never strands an execution; the index now covers queued work again.
 * - execution_files: the uploads an execution reads; the janitor keeps a file while an
 *   execution that reads it is not terminal.
 * - executions.claims counts claims, so "first claim" is a fact of the row and not a guess from
 *   timestamps (two claims may read the same clock).
 * - A credit's reference is unique per project: a retried `balance credit --reference R` is a
 *   no-op.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE OR REPLACE FUNCTION tes_now() RETURNS timestamptz LANGUAGE sql STABLE PARALLEL SAFE AS $$ SELECT now() $$;
    CREATE OR REPLACE FUNCTION tes_month() RETURNS date LANGUAGE sql STABLE PARALLEL SAFE
      AS $$ SELECT date_trunc('month', tes_now() AT TIME ZONE 'UTC')::date $$;

    ALTER TABLE executions ADD COLUMN claims integer NOT NULL DEFAULT 0;
    UPDATE executions SET claims = 1 WHERE started_at IS NOT NULL;
    UPDATE executions SET lease_expires_at = now()
     WHERE lease_expires_at IS NULL AND (status = 'queued' OR (status = 'running' AND lease_owner IS NULL));
    DROP INDEX executions_lease_idx;
    CREATE INDEX executions_lease_idx ON executions (lease_expires_at) WHERE status IN ('queued', 'running', 'waiting');

    CREATE TABLE execution_files (
      execution_id  text NOT NULL REFERENCES executions(id),
      file_id       text NOT NULL REFERENCES files(id),
      project_id    text NOT NULL,
      PRIMARY KEY (execution_id, file_id)
    );
    -- The janitor asks "does an open execution read this file?"
    CREATE INDEX execution_files_file_idx ON execution_files (file_id);

    CREATE UNIQUE INDEX ledger_credit_reference_idx ON ledger_entries (project_id, reference)
      WHERE kind = 'credit' AND account = 'available' AND reference IS NOT NULL;
  `);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    DROP INDEX ledger_credit_reference_idx;
    DROP TABLE execution_files;
    ALTER TABLE executions DROP COLUMN claims;
    DROP INDEX executions_lease_idx;
    CREATE INDEX executions_lease_idx ON executions (lease_expires_at) WHERE status IN ('running', 'waiting');
    DROP FUNCTION tes_month();
    DROP FUNCTION tes_now();
  `);
}
