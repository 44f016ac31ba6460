import type { Knex } from 'knex';

/**
 * Whether a step calls an external provider. Recorded when the step starts, so recovery
 * code that does not know the catalog (relay, dead-letter handling) can tell a step whose
 * outcome is unknown and may have cost money (needs_review) from a local one (safe to fail
 * or rerun).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE execution_steps ADD COLUMN external boolean NOT NULL DEFAULT false');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE execution_steps DROP COLUMN external');
}
