import type { Knex } from 'knex';

/**
 * The incremental ledger audit (issue #24): a periodic pass costs what was written since the
 * previous one, never what exists.
 *
 * - ledger_entries.audit_xid and executions.audit_xid: the 64-bit id of the transaction that
 *   wrote the row (pg_current_xact_id()). The journal gets it from a column default, so the
 *   previous release's inserts (which name no such column) carry it too; NOT VALID CHECK makes
 *   it mandatory for every new journal row without reading the old ones. Executions get it on
 *   insert from the default and, through tes_executions_audit_stamp, on every update that changes
 *   what the audit checks (status, reservation, charge, project), whoever runs the update.
 *
 *   Why a transaction id and not the bigserial id or created_at: a row is numbered (nextval,
 *   now()) before its transaction commits, so a transaction that commits later can carry a
 *   smaller id than rows already audited, and a checkpoint by id or time would skip it for ever.
 *   A transaction id is different: every transaction below the oldest one still running
 *   (pg_snapshot_xmin of the pass's snapshot) has ended, and any transaction that commits later
 *   has, or will get, an id at or above it. So "every row with audit_xid below the horizon" is a
 *   closed set once the horizon is at most that xmin, and the pass's cursor never advances past
 *   a row that can still appear.
 * - Rows written before this migration have audit_xid NULL. They form a closed set too: the
 *   ALTERs below wait for every transaction writing those tables, and later inserts take the
 *   default. Their journal sums become the baseline of ledger_audit_totals (below); their
 *   per-transaction and per-execution checks are the full audit's (`admin ledger audit`), which
 *   the operator runs once after this deploy (deploy/README.md).
 * - ledger_audit_totals: per project and account, the sum of every journal row the incremental
 *   audit has passed (the baseline plus each pass's rows), maintained by the audit alone, so the
 *   write path pays nothing and cannot deadlock on it. journal = totals + rows after the cursor.
 * - ledger_audit_state: one row, the cursors and the last verdict (so a replica that finds
 *   another one auditing reports the same verdict), and the findings still open (re-checked each
 *   pass, so a broken invariant keeps the verdict at 0 until it is repaired, as today's audit does).
 *
 * Not in a transaction: the indexes are built CONCURRENTLY (submits and settlements go on while
 * they build), and the baseline sums the old journal without holding a lock writers wait for.
 * Every step is idempotent, so a rerun after a failure completes it.
 */
export const config = { transaction: false };

export async function up(knex: Knex): Promise<void> {
  // The ALTERs are catalog changes (no rewrite: the column has no default when added), but take
  // an exclusive lock; while one waits for a long transaction every submit would queue behind
  // it, so it gives up after a few seconds instead (the migration then fails and is rerun).
  await knex.raw(`
    SET LOCAL lock_timeout = '5s';
    ALTER TABLE ledger_entries ADD COLUMN IF NOT EXISTS audit_xid xid8;
    ALTER TABLE ledger_entries ALTER COLUMN audit_xid SET DEFAULT pg_current_xact_id();
    ALTER TABLE executions ADD COLUMN IF NOT EXISTS audit_xid xid8;
    ALTER TABLE executions ALTER COLUMN audit_xid SET DEFAULT pg_current_xact_id();
  `);
  await knex.raw(`
    DO $$ BEGIN
      IF NOT EXISTS (SELECT 1 FROM pg_constraint WHERE conname = 'ledger_entries_audit_xid_set') THEN
        ALTER TABLE ledger_entries ADD CONSTRAINT ledger_entries_audit_xid_set CHECK (audit_xid IS NOT NULL) NOT VALID;
      END IF;
    END $$;

    CREATE OR REPLACE FUNCTION tes_executions_audit_stamp() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      NEW.audit_xid := pg_current_xact_id();
      RETURN NEW;
    END $$;
    DROP TRIGGER IF EXISTS executions_audit_stamp ON executions;
    CREATE TRIGGER executions_audit_stamp BEFORE UPDATE ON executions FOR EACH ROW
      WHEN (OLD.status IS DISTINCT FROM NEW.status OR OLD.reserved_micros IS DISTINCT FROM NEW.reserved_micros
            OR OLD.charged_micros IS DISTINCT FROM NEW.charged_micros OR OLD.project_id IS DISTINCT FROM NEW.project_id)
      EXECUTE FUNCTION tes_executions_audit_stamp();

    CREATE TABLE IF NOT EXISTS ledger_audit_totals (
      project_id     text NOT NULL,
      account        text NOT NULL,
      amount_micros  bigint NOT NULL,
      PRIMARY KEY (project_id, account)
    );
    CREATE TABLE IF NOT EXISTS ledger_audit_state (
      id                   integer PRIMARY KEY CHECK (id = 1),
      ledger_xid           xid8 NOT NULL DEFAULT '0',
      ledger_id            bigint NOT NULL DEFAULT 0,
      execution_xid        xid8 NOT NULL DEFAULT '0',
      execution_id         text NOT NULL DEFAULT '',
      open_transactions    text[] NOT NULL DEFAULT '{}',
      open_executions      text[] NOT NULL DEFAULT '{}',
      ok                   boolean,
      problems             jsonb NOT NULL DEFAULT '[]',
      checked_at           timestamptz
    );
  `);
  const indexes: [string, string][] = [
    ['ledger_entries_audit_idx', 'ON ledger_entries (audit_xid, id) WHERE audit_xid IS NOT NULL'],
    ['executions_audit_idx', 'ON executions (audit_xid, id) WHERE audit_xid IS NOT NULL'],
  ];
  for (const [name, definition] of indexes) {
    await knex.raw(`DROP INDEX CONCURRENTLY IF EXISTS ${name}`);
    await knex.raw(`CREATE INDEX CONCURRENTLY ${name} ${definition}`);
  }
  // The baseline: the old journal's sums, once (the state row records that it was taken).
  await knex.transaction(async (trx) => {
    const done = await trx.raw<{ rows: unknown[] }>('SELECT 1 FROM ledger_audit_state WHERE id = 1 FOR UPDATE');
    if (done.rows.length > 0) return;
    await trx.raw(`
      DELETE FROM ledger_audit_totals;
      INSERT INTO ledger_audit_totals (project_id, account, amount_micros)
      SELECT project_id, account, sum(amount_micros) FROM ledger_entries WHERE audit_xid IS NULL GROUP BY project_id, account;
      INSERT INTO ledger_audit_state (id) VALUES (1);
    `);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    DROP TABLE IF EXISTS ledger_audit_state;
    DROP TABLE IF EXISTS ledger_audit_totals;
    DROP TRIGGER IF EXISTS executions_audit_stamp ON executions;
    DROP FUNCTION IF EXISTS tes_executions_audit_stamp();
    ALTER TABLE ledger_entries DROP CONSTRAINT IF EXISTS ledger_entries_audit_xid_set;
    DROP INDEX IF EXISTS ledger_entries_audit_idx;
    DROP INDEX IF EXISTS executions_audit_idx;
    ALTER TABLE ledger_entries DROP COLUMN IF EXISTS audit_xid;
    ALTER TABLE executions DROP COLUMN IF EXISTS audit_xid;
  `);
}
