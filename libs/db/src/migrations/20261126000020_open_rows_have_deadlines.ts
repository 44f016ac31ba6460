import type { Knex } from 'knex';

/**
 * Every execution open for work has a deadline, whoever writes the row (issue #26, defect 1).
 *
 * Migration 20261123000010 made lease_expires_at the deadline the reaper enforces, and today's
 * code always writes one. The code of an older release, which may still run beside the new one
 * during a rolling deploy or after a rollback of the images, does not: it submits with a NULL
 * deadline and its releaseLease sets it to NULL. The reaper's `lease_expires_at < tes_now()`
 * never matches NULL, so such an execution whose message is lost would hold its reservation
 * forever.
 *
 * So the schema fills it: a row written queued, running or waiting without a deadline gets one
 * minute from the database's clock (the default DISPATCH_DEADLINE_MS: the old writer publishes
 * or requeues its own message at once, so a shorter one would only send duplicates). The reaper
 * keeps its index-bounded predicate (executions_lease_idx); a NULL it could never see does not
 * exist. Rows already written that way are due at once. The trigger's WHEN is evaluated without
 * calling the function, so the rows today's code writes (which always carry a deadline) pay
 * next to nothing. Terminal and needs_review rows keep NULL (settle and markNeedsReview clear it).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE FUNCTION tes_fill_open_deadline() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      NEW.lease_expires_at := tes_now() + interval '1 minute';
      RETURN NEW;
    END $$;
    CREATE TRIGGER executions_open_deadline BEFORE INSERT OR UPDATE ON executions
      FOR EACH ROW WHEN (NEW.lease_expires_at IS NULL AND NEW.status IN ('queued', 'running', 'waiting'))
      EXECUTE FUNCTION tes_fill_open_deadline();

    -- (executions_lease_idx covers exactly these statuses, so this reads no history)
    UPDATE executions SET lease_expires_at = tes_now()
     WHERE lease_expires_at IS NULL AND status IN ('queued', 'running', 'waiting');
  `);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP TRIGGER executions_open_deadline ON executions; DROP FUNCTION tes_fill_open_deadline()');
}
