import type { Knex } from 'knex';

/**
 * What the gateway measured of an upload (duration, frame size, streams; see FileFacts in
 * @tes/core), so a quote fits the real input. NULL for files stored before, or by a gateway
 * without ffprobe: their quotes keep the schema's largest input. Written once with the row:
 * a file's quotes never change while it lives.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE files ADD COLUMN facts jsonb');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE files DROP COLUMN facts');
}
