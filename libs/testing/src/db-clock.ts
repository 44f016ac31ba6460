import type { Knex } from 'knex';

/**
 * Moves the database's clock (tes_now(), and so tes_month()) by `offset`, a Postgres interval
 * such as '40 days' or '-1 hour', against its real now(): the process clocks of the test stay
 * where they are, which is how a test shows that a deadline, an expiry or a month is read from
 * the database and not from a process. The clock keeps running. For this test database only;
 * '0' puts it back.
 */
export async function shiftDatabaseClock(db: Knex, offset: string): Promise<void> {
  if (!/^-?[0-9]+ (milliseconds?|seconds?|minutes?|hours?|days?)$|^0$/.test(offset)) throw new Error(`not an interval this helper takes: ${offset}`);
  await db.raw(`CREATE OR REPLACE FUNCTION tes_now() RETURNS timestamptz LANGUAGE sql STABLE PARALLEL SAFE AS $$ SELECT now() + interval '${offset}' $$`);
}
