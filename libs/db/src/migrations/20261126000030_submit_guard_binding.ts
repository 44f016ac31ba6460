import type { Knex } from 'knex';

/**
 * tes_submit_guard(lock_key, price_version, project_id, idempotency_key): the guard of
 * 20261123000011, which also answers false when the key is bound already, read with a fresh
 * snapshot after the key's lock is taken (a VOLATILE function's queries see what was committed
 * after its statement began).
 *
 * Why: the submit statement's own `NOT EXISTS` on the key reads the statement's snapshot. A
 * resend that started while its original was in flight took that snapshot before the original
 * committed, so it saw no binding; it then waited on the key's lock, took the balance row and
 * inserted the key, and the unique check waited on a settlement updating the original's
 * execution row, which itself waited on the balance row: a deadlock (40P01), in which either
 * the resend or the worker's settlement was killed. Read under the lock, the binding is there
 * (the original commits before it releases the lock), and the resend writes nothing: it takes no
 * balance row and inserts nothing.
 *
 * Expand only: the two-argument guard stays for the previous release's submit, which still calls
 * it during a rolling deploy.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE FUNCTION tes_submit_guard(lock_key text, price_version text, project_id text, idempotency_key text)
      RETURNS boolean LANGUAGE plpgsql VOLATILE AS $$
    BEGIN
      PERFORM pg_advisory_xact_lock(hashtextextended(lock_key, 0));
      IF EXISTS (SELECT 1 FROM executions b WHERE b.project_id = tes_submit_guard.project_id AND b.idempotency_key = tes_submit_guard.idempotency_key) THEN
        RETURN false;
      END IF;
      RETURN (SELECT version FROM price_versions ORDER BY seq DESC LIMIT 1) IS NOT DISTINCT FROM price_version;
    END $$;
  `);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP FUNCTION tes_submit_guard(text, text, text, text)');
}
