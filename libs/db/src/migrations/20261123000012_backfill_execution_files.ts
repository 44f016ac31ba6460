import type { Knex } from 'knex';

/**
 * execution_files for executions that were already open when 20261123000010 added the table
 * (the janitor keeps a file only while an open execution is known to read it). Any string in the
 * arguments that names a file of the execution's project counts: every tool names its uploads
 * by file id, wherever in its arguments.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    INSERT INTO execution_files (execution_id, file_id, project_id)
    SELECT DISTINCT e.id, f.id, e.project_id
      FROM executions e
      CROSS JOIN LATERAL jsonb_path_query(e.arguments, 'strict $.**') AS v(value)
      JOIN files f ON f.project_id = e.project_id AND f.id = v.value #>> '{}'
     WHERE e.status IN ('queued', 'running', 'waiting', 'needs_review') AND jsonb_typeof(v.value) = 'string'
    ON CONFLICT DO NOTHING
  `);
}

export async function down(): Promise<void> {
  // rows of executions that were open at the time: nothing to undo
}
