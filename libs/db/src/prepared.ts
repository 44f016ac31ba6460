import type { Knex } from 'knex';

/** The values of a raw statement, by name (`:name` in its SQL). */
export type Bindings = Readonly<Knex.ValueDict>;

const registered = new Map<string, string>();

/**
 * Runs a statement as a named prepared statement: Postgres parses and plans it once per
 * pooled connection rather than on every call (the status poll under pgbench: ≈23k tps
 * parsed each time, ≈67k prepared, on this 2-core machine). Used on the hot paths only.
 * Each name belongs to one SQL text (checked here: node-postgres would otherwise fail on the
 * connections that prepared the other text). Works inside a knex transaction (the statement
 * runs on its connection). A connection pooler in transaction mode must support prepared
 * statements (PgBouncer ≥ 1.21 with max_prepared_statements); session mode always does.
 *
 * Bindings are named (`:projectId`), one name per value however often the SQL uses it.
 */
export function prepared<T>(db: Knex | Knex.Transaction, name: string, sql: string, bindings: Bindings): Promise<T> {
  const known = registered.get(name);
  if (known === undefined) registered.set(name, sql);
  else if (known !== sql) throw new Error(`prepared statement ${name} is already used for another SQL text`);
  return db.raw(sql, bindings).options({ name });
}
