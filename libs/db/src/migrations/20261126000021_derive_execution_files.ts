import type { Knex } from 'knex';

/**
 * execution_files is derived in the database (issue #26, defect 1): whoever inserts an execution,
 * the uploads its arguments name are linked to it in the same statement, so the janitor keeps
 * them until it ends. Today's submit also writes the rows the catalog names (its `ef` part, from
 * the files it checked live); an older release's submit writes none, and during a rolling deploy
 * or after a rollback of the images that code runs against this schema.
 *
 * Which strings count: as in the backfill of 20261123000012, a string anywhere in the arguments
 * that is the id of a file of the execution's project (every tool names its uploads by file id),
 * here only strings shaped like a file id ("file_…"), so the WHEN below skips the function for
 * the arguments that name none. A string that merely equals one of the project's file ids keeps
 * that file until the execution ends: a later deletion, never a lost input.
 *
 * The files are locked FOR SHARE, as the submit statement does: the janitor (FOR UPDATE SKIP
 * LOCKED, then a second in-use check in a statement of its own) either skips them until this
 * commits and then sees the rows, or has locked them first, and this waits and links a file the
 * janitor has just deleted (the old writer did not check its files at commit; the worker then
 * fails the execution with invalid_input_file, as before). Rows of executions still open that an
 * old writer left without links are backfilled here (one pass over executions, as the backfill of
 * 20261123000012 made).
 */
// (`\\?`: knex.raw reads a bare ? as a binding)
const FILE_IDS_PATH = `'strict $.** \\? (@.type() == "string" && @ starts with "file_")'`;

export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE FUNCTION tes_link_execution_files() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      INSERT INTO execution_files (execution_id, file_id, project_id)
      SELECT NEW.id, f.id, NEW.project_id FROM files f
       WHERE f.project_id = NEW.project_id
         AND f.id IN (SELECT v #>> '{}' FROM jsonb_path_query(NEW.arguments, ${FILE_IDS_PATH}) AS v)
         FOR SHARE OF f
      ON CONFLICT DO NOTHING;
      RETURN NULL;
    END $$;
    CREATE TRIGGER executions_link_files AFTER INSERT ON executions
      FOR EACH ROW WHEN (jsonb_path_exists(NEW.arguments, ${FILE_IDS_PATH}))
      EXECUTE FUNCTION tes_link_execution_files();

    INSERT INTO execution_files (execution_id, file_id, project_id)
    SELECT DISTINCT e.id, f.id, e.project_id
      FROM executions e
      CROSS JOIN LATERAL jsonb_path_query(e.arguments, ${FILE_IDS_PATH}) AS v(value)
      JOIN files f ON f.project_id = e.project_id AND f.id = v.value #>> '{}'
     WHERE e.status IN ('queued', 'running', 'waiting', 'needs_review')
    ON CONFLICT DO NOTHING;
  `);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP TRIGGER executions_link_files ON executions; DROP FUNCTION tes_link_execution_files()');
}
