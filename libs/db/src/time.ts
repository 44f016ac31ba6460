import type { Knex } from 'knex';

export function iso(value: Date | string | null | undefined): string | null {
  if (value === null || value === undefined) return null;
  return (value instanceof Date ? value : new Date(value)).toISOString();
}

/**
 * The database's clock (tes_now()), `plusMs` ahead: what a process reads when it must write a
 * time another process compares (a deadline in a checkpoint, an expiry). Process clocks
 * disagree with each other and with the database; every comparison in our SQL reads tes_now().
 */
export async function databaseTime(db: Knex, plusMs = 0): Promise<Date> {
  const res = await db.raw<{ rows: { at: Date }[] }>(`SELECT tes_now() + (?::bigint * interval '1 millisecond') AS at`, [Math.round(plusMs)]);
  return res.rows[0]!.at;
}
