import type { Knex } from 'knex';

/**
 * The W3C traceparent of the span that wrote an outbox row (the submit's, when tracing is on),
 * so whoever publishes the row, the gateway right after commit or the relay's sweep long
 * after, continues that trace into the message headers. NULL when tracing is off and for rows
 * the reaper writes (their messages start a trace of their own). A nullable column without a
 * default: added without rewriting the table.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE outbox ADD COLUMN trace_context text');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE outbox DROP COLUMN trace_context');
}
