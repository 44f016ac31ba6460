import type { Knex } from 'knex';

/**
 * What the workers can run: each worker reports at start, per tool model, whether the
 * programs it needs are on its machine. The latest report wins. No report yet means
 * "assume available" (workers may be scaled to zero); a report of missing programs makes
 * the catalog show the model unavailable rather than fail executions at run time.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE TABLE tool_capabilities (
      tool         text NOT NULL,
      model        text NOT NULL,
      available    boolean NOT NULL,
      missing      text[] NOT NULL DEFAULT '{}',
      reported_by  text NOT NULL,
      reported_at  timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (tool, model)
    );
  `);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP TABLE tool_capabilities;');
}
