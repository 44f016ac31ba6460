import type { Knex } from 'knex';

/**
 * tes_submit_guard(lock_key, price_version): the submit statement calls it before it writes.
 * It takes a transaction-scoped advisory lock on the (project, idempotency key) pair, then reads
 * the current price version with a fresh snapshot (a VOLATILE function's queries see what was
 * committed after its statement began) and answers whether it is the one the submit was quoted
 * under.
 *
 * Why: a resend that a check refuses (the prices changed meanwhile) looks for its binding under
 * the same lock. Either its original's statement holds the lock (the resend waits, then finds
 * the execution and replays it), or the original has not reached it yet (then the original will
 * read the new price version after the lock, and refuse too). A resend is never told "rejected"
 * while its original may still commit, so the caller never re-quotes under a new key and pays
 * twice.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE FUNCTION tes_submit_guard(lock_key text, price_version text) RETURNS boolean LANGUAGE plpgsql VOLATILE AS $$
    BEGIN
      PERFORM pg_advisory_xact_lock(hashtextextended(lock_key, 0));
      RETURN (SELECT version FROM price_versions ORDER BY seq DESC LIMIT 1) IS NOT DISTINCT FROM price_version;
    END $$;
  `);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP FUNCTION tes_submit_guard(text, text)');
}
