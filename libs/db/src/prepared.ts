import type { Knex } from 'knex';

/** The values of a raw statement, by name (`:name` in its SQL). */
export type Bindings = Readonly<Knex.ValueDict>;

/** A statement's SQL with `$n` placeholders, and the binding name each one takes, in order. */
interface Compiled {
  sql: string;
  text: string;
  names: string[];
}

const registered = new Map<string, Compiled>();

/** node-postgres's client, as the pool lends it: what is used of it here. */
interface PgConnection {
  query(config: { name: string; text: string; values: unknown[] }): Promise<unknown>;
}

/**
 * knex's named bindings, as its raw formatter reads them: `:name` is a value (`:name:` an
 * identifier, refused here), and `::type` casts are left alone because no binding has a type's
 * name (hence the house rule: no binding named like an SQL type).
 */
const NAMED = /\\?(:(\w+):(?=::)|:(\w+):(?!:)|:(\w+))/g;

function compile(name: string, sql: string, bindings: Bindings): Compiled {
  const names: string[] = [];
  const text = sql.replace(NAMED, (match: string, whole: string, identifier?: string, identifier2?: string, value?: string) => {
    if (match !== whole) return whole; // escaped with a backslash
    const key = identifier ?? identifier2 ?? value!;
    if (!Object.prototype.hasOwnProperty.call(bindings, key)) return match; // not a binding: a cast, a format ('HH24:MI:SS')
    if (value === undefined) throw new Error(`prepared statement ${name}: identifier bindings (${match}) are not supported`);
    names.push(value);
    return `$${names.length}`;
  });
  return { sql, text, names };
}

/**
 * Runs a statement as a named prepared statement: Postgres parses and plans it once per
 * pooled connection rather than on every call (the status poll under pgbench: ≈23k tps
 * parsed each time, ≈67k prepared, on this 2-core machine). Used on the hot paths only.
 * Each name belongs to one SQL text (checked here: node-postgres would otherwise fail on the
 * connections that prepared the other text). Works inside a knex transaction (the statement
 * runs on its connection). A connection pooler in transaction mode must support prepared
 * statements (PgBouncer ≥ 1.21 with max_prepared_statements); session mode always does.
 *
 * Bindings are named (`:projectId`), one name per value however often the SQL uses it; the
 * statement must use the same names on every call. The named SQL is turned into `$n`
 * placeholders once per statement, and the statement goes to node-postgres on a connection
 * knex's pool (or the transaction) lends: knex would parse the named bindings out of the
 * text again on every call (the submit's statement is ≈ 3.5 KB), which cost ≈ 4 % of the
 * gateway's CPU per submit. knex's acquire timeout, its pool and its transactions still apply;
 * its 'query' events are not emitted for these statements.
 */
export async function prepared<T>(db: Knex | Knex.Transaction, name: string, sql: string, bindings: Bindings): Promise<T> {
  let compiled = registered.get(name);
  if (compiled === undefined) {
    compiled = compile(name, sql, bindings);
    registered.set(name, compiled);
  } else if (compiled.sql !== sql) throw new Error(`prepared statement ${name} is already used for another SQL text`);
  const values = compiled.names.map((n) => {
    const v = bindings[n];
    if (v === undefined) throw new Error(`prepared statement ${name}: no value for :${n}`);
    return v;
  });
  // a finished transaction's connection is back in the pool: never run on it (knex refuses too)
  if ('isCompleted' in db && db.isCompleted()) throw new Error(`prepared statement ${name}: the transaction has already completed`);
  const client = db.client as { acquireConnection(): Promise<PgConnection>; releaseConnection(c: PgConnection): Promise<void> };
  const connection = await client.acquireConnection();
  try {
    return (await connection.query({ name, text: compiled.text, values })) as T;
  } finally {
    await client.releaseConnection(connection);
  }
}
