import type { Knex } from 'knex';

/**
 * Fair share of worker slots across projects (issue #25): what the claim needs besides the
 * executions themselves.
 *
 * - worker_slots: each worker's slots per category, written every WORKER_SLOTS_HEARTBEAT_MS by
 *   the worker (tes_now()); rows older than WORKER_SLOTS_LIVE_MS are ignored, and pruned by the
 *   heartbeats. Their sum is the category's live capacity, of which a project (and an
 *   organization) may hold PROJECT_SLOT_SHARE by default. A few rows per live worker.
 * - project_category_limits: an operator's override of one project's limit in one category
 *   (admin projects set-limit). Few rows; read by primary key.
 *
 * New tables only: the previous release neither reads nor writes them, and claims by id as
 * it did (outside the limits: a rolling deploy may briefly exceed them, never loses work).
 * The indexes the pick reads are built CONCURRENTLY in 20261126000101.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE TABLE worker_slots (
      worker_id     text NOT NULL,
      category      text NOT NULL,
      slots         integer NOT NULL CHECK (slots > 0),
      heartbeat_at  timestamptz NOT NULL,
      PRIMARY KEY (worker_id, category)
    );
    CREATE TABLE project_category_limits (
      project_id   text NOT NULL REFERENCES projects(id),
      category     text NOT NULL,
      max_running  integer NOT NULL CHECK (max_running > 0),
      updated_at   timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (project_id, category)
    );
  `);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP TABLE project_category_limits; DROP TABLE worker_slots;');
}
