import type { Knex } from 'knex';

/**
 * Append-only double-entry journal. Every money movement is one transaction_id whose
 * postings sum to zero over four accounts per project:
 *   funding   - money that came in from outside (credits post negative here)
 *   available - spendable balance
 *   reserved  - held for accepted, unsettled executions
 *   charged   - settled charges (revenue)
 * A trigger refuses UPDATE and DELETE so history cannot be rewritten.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE TABLE ledger_entries (
      id              bigserial PRIMARY KEY,
      transaction_id  text NOT NULL,
      project_id      text NOT NULL REFERENCES projects(id),
      execution_id    text,
      kind            text NOT NULL CHECK (kind IN ('credit','reserve','settle','resolve')),
      account         text NOT NULL CHECK (account IN ('funding','available','reserved','charged')),
      amount_micros   bigint NOT NULL,
      reference       text,
      created_at      timestamptz NOT NULL DEFAULT now()
    );
    CREATE INDEX ledger_project_idx ON ledger_entries (project_id, account);
    CREATE INDEX ledger_execution_idx ON ledger_entries (execution_id) WHERE execution_id IS NOT NULL;
    CREATE INDEX ledger_transaction_idx ON ledger_entries (transaction_id);

    CREATE FUNCTION ledger_entries_append_only() RETURNS trigger AS $$
    BEGIN
      RAISE EXCEPTION 'ledger_entries is append-only';
    END;
    $$ LANGUAGE plpgsql;
    CREATE TRIGGER ledger_entries_no_rewrite BEFORE UPDATE OR DELETE ON ledger_entries
      FOR EACH ROW EXECUTE FUNCTION ledger_entries_append_only();
  `);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP TABLE ledger_entries; DROP FUNCTION ledger_entries_append_only();');
}
