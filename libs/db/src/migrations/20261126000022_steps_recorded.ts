import type { Knex } from 'knex';

/**
 * tes_steps_recorded(execution_id): whether the execution has any step row, read with a FRESH
 * snapshot (issue #26, defect 1). The claim calls it in its RETURNING, after its UPDATE holds
 * the execution row: every step write takes that row FOR SHARE, so every step the previous lease
 * holders wrote has committed by then, and a VOLATILE function's query (READ COMMITTED) sees
 * what committed after the claim's statement began, which a subquery of the statement itself
 * would not.
 *
 * Why: the worker skips reading the steps on a claim that finds none. It used to judge that from
 * `claims = 1`; but an older release's claims did not count `claims`, so a new worker's claim
 * after an old one that had run step 0 reported a first claim and ran everything again (a
 * provider step sent twice). Whether steps exist is the fact the skip needs, whoever claimed.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE FUNCTION tes_steps_recorded(exec_id text) RETURNS boolean LANGUAGE plpgsql VOLATILE AS $$
    BEGIN
      RETURN EXISTS (SELECT 1 FROM execution_steps s WHERE s.execution_id = exec_id);
    END $$;
  `);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP FUNCTION tes_steps_recorded(text)');
}
