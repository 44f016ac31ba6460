import type { Knex } from 'knex';

/**
 * The trigger that writes an ended execution's webhook deliveries also notifies
 * tes_webhook_deliveries when it wrote any, so a relay sends them as the execution's transaction
 * commits instead of at its next poll (it still polls, for retries and for a missed notification).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE OR REPLACE FUNCTION tes_execution_webhooks() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE written integer;
    BEGIN
      INSERT INTO webhook_deliveries (id, endpoint_id, project_id, execution_id, event_type)
      SELECT 'msg_' || replace(gen_random_uuid()::text, '-', ''), w.id, NEW.project_id, NEW.id, 'execution.' || NEW.status
        FROM webhook_endpoints w
       WHERE w.project_id = NEW.project_id AND w.deleted_at IS NULL AND ('execution.' || NEW.status) = ANY (w.events);
      GET DIAGNOSTICS written = ROW_COUNT;
      IF written > 0 THEN
        PERFORM pg_notify('tes_webhook_deliveries', '');
      END IF;
      RETURN NULL;
    END $$;
  `);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE OR REPLACE FUNCTION tes_execution_webhooks() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      INSERT INTO webhook_deliveries (id, endpoint_id, project_id, execution_id, event_type)
      SELECT 'msg_' || replace(gen_random_uuid()::text, '-', ''), w.id, NEW.project_id, NEW.id, 'execution.' || NEW.status
        FROM webhook_endpoints w
       WHERE w.project_id = NEW.project_id AND w.deleted_at IS NULL AND ('execution.' || NEW.status) = ANY (w.events);
      RETURN NULL;
    END $$;
  `);
}
