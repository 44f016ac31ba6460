import type { Knex } from 'knex';

/**
 * execution_line: the executions that are queued or running now, one row each, kept by triggers
 * on executions whoever writes them (issue #24). The fair claim, a queued execution's place in
 * line, the relay's queue gauges and `admin queue show` read it instead of partial indexes of
 * executions.
 *
 * Why a table: every execution enters the line and leaves it, so a partial index of executions
 * (executions_queued_fair_idx) filled with dead entries that only a vacuum of the indexes
 * removes, and at 10 M rows VACUUM, autovacuum's too, skips the indexes while dead rows sit on
 * under 2 % of the table's pages: nearly always. The fair claim then slowed with the churn since
 * the last manual cleanup (2.05 ms and 1,467 buffers a claim after four bench runs, 0.30 ms and
 * 59 after `VACUUM (INDEX_CLEANUP ON) executions`, which took 13.6 s). This table holds the line
 * and nothing else, so a vacuum of it costs the line, and the relay runs one every minute with
 * its indexes cleaned (executions/line.ts, which also repairs the line where the triggers were
 * bypassed); its autovacuum thresholds are absolute, not a fraction of a table that never
 * grows.
 *
 * The triggers are AFTER row triggers of the statement that moves the execution, so the line
 * changes in the same transaction as the execution, for the previous release's writes too. They
 * fire only when a row enters the line, leaves it, or a live row's line columns change (WHEN is
 * evaluated without calling the function): the service never changes category, project_id or
 * created_at after the insert, but a repair by hand (or a test's backdating) is followed too.
 *
 * In one transaction: CREATE TRIGGER takes a SHARE ROW EXCLUSIVE lock on executions, so no
 * execution moves between the triggers starting and the backfill reading what is live (the
 * backfill's snapshot is taken after the lock, so it sees every move committed before it). It
 * reads the live rows through executions_lease_idx (every live row has a deadline), a few
 * milliseconds behind a line of thousands; writers wait that long. lock_timeout gives up after
 * a few seconds behind a long transaction, and the rerun starts over (nothing was committed).
 */
const LINE = `('queued', 'running')`;

export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    SET LOCAL lock_timeout = '5s';
    CREATE TABLE execution_line (
      execution_id text PRIMARY KEY,
      category     text NOT NULL,
      project_id   text NOT NULL,
      status       text NOT NULL CHECK (status IN ${LINE}),
      created_at   timestamptz NOT NULL
    ) WITH (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 2000,
            autovacuum_analyze_scale_factor = 0, autovacuum_analyze_threshold = 2000);
    CREATE INDEX execution_line_queued_idx ON execution_line (category, project_id, created_at, execution_id) WHERE status = 'queued';
    CREATE INDEX execution_line_running_idx ON execution_line (category, project_id) WHERE status = 'running';

    CREATE FUNCTION tes_execution_line() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF TG_OP <> 'DELETE' AND NEW.status IN ${LINE} THEN
        INSERT INTO execution_line (execution_id, category, project_id, status, created_at)
        VALUES (NEW.id, NEW.category, NEW.project_id, NEW.status, NEW.created_at)
        ON CONFLICT (execution_id) DO UPDATE
          SET status = EXCLUDED.status, category = EXCLUDED.category, project_id = EXCLUDED.project_id, created_at = EXCLUDED.created_at;
      ELSE
        DELETE FROM execution_line WHERE execution_id = OLD.id;
      END IF;
      RETURN NULL;
    END $$;
    CREATE TRIGGER executions_line_insert AFTER INSERT ON executions
      FOR EACH ROW WHEN (NEW.status IN ${LINE}) EXECUTE FUNCTION tes_execution_line();
    CREATE TRIGGER executions_line_update AFTER UPDATE OF status, category, project_id, created_at ON executions
      FOR EACH ROW WHEN ((NEW.status IS DISTINCT FROM OLD.status OR NEW.category IS DISTINCT FROM OLD.category
                          OR NEW.project_id IS DISTINCT FROM OLD.project_id OR NEW.created_at IS DISTINCT FROM OLD.created_at)
                         AND (NEW.status IN ${LINE} OR OLD.status IN ${LINE}))
      EXECUTE FUNCTION tes_execution_line();
    CREATE TRIGGER executions_line_delete AFTER DELETE ON executions
      FOR EACH ROW WHEN (OLD.status IN ${LINE}) EXECUTE FUNCTION tes_execution_line();

    SET LOCAL enable_seqscan = off;
    INSERT INTO execution_line (execution_id, category, project_id, status, created_at)
    SELECT id, category, project_id, status, created_at FROM executions
     WHERE status IN ${LINE} AND lease_expires_at IS NOT NULL;
    RESET enable_seqscan;
  `);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    DROP TRIGGER executions_line_insert ON executions;
    DROP TRIGGER executions_line_update ON executions;
    DROP TRIGGER executions_line_delete ON executions;
    DROP FUNCTION tes_execution_line();
    DROP TABLE execution_line;
  `);
}
