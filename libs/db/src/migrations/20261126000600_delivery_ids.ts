import type { Knex } from 'knex';

/**
 * Webhook delivery ids from the same generator as every other id (issue #30): `tes_new_id(prefix)`
 * writes core's form (libs/core/src/ids.ts), a prefix and a ULID — 48 bits of milliseconds from
 * clock_timestamp(), then 80 random bits from gen_random_uuid() (bytes 0-4 and 9-13 of a v4 UUID,
 * clear of its version and variant bits), in Crockford base32. The delivery trigger used
 * `'msg_' || replace(gen_random_uuid()::text, '-', '')`: a random primary key, so every insert
 * landed on a random leaf of webhook_deliveries_pkey (issue #24: on a big index that leaf is
 * rarely cached, and its first change after a checkpoint writes the whole page to the WAL).
 * Now they arrive at the right edge, like executions'. Within one millisecond ids are random,
 * not monotonic as core's are within a process; nothing orders deliveries by id.
 *
 * The Standard Webhooks `webhook-id` header is the delivery id: it keeps its `msg_` prefix, and
 * receivers treat it as an opaque string (32 hex digits before, 26 base32 characters now).
 *
 * The trigger function is changed in place, from its latest definition (migration
 * 20261126000070): the one expression is replaced in pg_get_functiondef's text, and the
 * migration fails if it is not there, so a newer definition is never overwritten by an older
 * copy. libs/db/schema.sql shows the result.
 *
 * Expand/contract: a new function and a new id form in a text column; the previous release
 * reads delivery ids as opaque text and keeps working.
 */
const OLD_ID = `'msg_' || replace(gen_random_uuid()::text, '-', '')`;
const NEW_ID = `tes_new_id('msg')`;

/** Replaces `from` with `to` in the delivery trigger's definition, or fails if it is not there. */
function swapInTrigger(from: string, to: string): string {
  return `
    DO $swap$
    DECLARE def text := pg_get_functiondef('tes_execution_webhooks()'::regprocedure);
    BEGIN
      IF position(${quote(from)} IN def) = 0 THEN
        RAISE EXCEPTION 'tes_execution_webhooks() does not contain %', ${quote(from)};
      END IF;
      EXECUTE replace(def, ${quote(from)}, ${quote(to)});
    END $swap$;`;
}

/** A SQL string literal in dollar quotes (the expressions contain single quotes). */
function quote(text: string): string {
  return `$q$${text}$q$`;
}

export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE FUNCTION tes_new_id(prefix text) RETURNS text LANGUAGE plpgsql VOLATILE PARALLEL SAFE AS $$
    DECLARE
      alphabet constant text := '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
      ms bigint := floor(extract(epoch FROM clock_timestamp()) * 1000);
      bytes constant bytea := uuid_send(gen_random_uuid());
      hi bigint := 0;
      lo bigint := 0;
      out text := '';
    BEGIN
      FOR i IN 0..4 LOOP
        hi := (hi << 8) | get_byte(bytes, i);
        lo := (lo << 8) | get_byte(bytes, 9 + i);
      END LOOP;
      FOR i IN REVERSE 9..0 LOOP
        out := out || substr(alphabet, ((ms >> (5 * i)) & 31)::int + 1, 1);
      END LOOP;
      FOR i IN REVERSE 7..0 LOOP
        out := out || substr(alphabet, ((hi >> (5 * i)) & 31)::int + 1, 1);
      END LOOP;
      FOR i IN REVERSE 7..0 LOOP
        out := out || substr(alphabet, ((lo >> (5 * i)) & 31)::int + 1, 1);
      END LOOP;
      RETURN prefix || '_' || out;
    END $$;
    ${swapInTrigger(OLD_ID, NEW_ID)}
  `);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    ${swapInTrigger(NEW_ID, OLD_ID)}
    DROP FUNCTION tes_new_id(text);
  `);
}
