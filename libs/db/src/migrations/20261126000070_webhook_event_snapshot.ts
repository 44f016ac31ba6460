import type { Knex } from 'knex';

/**
 * A webhook event describes the state that caused it (issue #26): the trigger that writes an
 * ended execution's deliveries also keeps, on each, a snapshot of the public execution as that
 * statement left it (`execution_snapshot`: the execution's fields and its steps', named as the
 * records name them, timestamps as the API formats them). The deliverer builds the body from
 * it, so an `execution.needs_review` sent after an operator resolved the execution still says
 * needs_review. Before, the body was read from the execution at the first attempt.
 *
 * The trigger also dates the first attempt by tes_now(), the clock the deliverer's claim and
 * retries now compare with.
 *
 * Expand/contract: one nullable column, no default (no rewrite, no lock beyond the ALTER's
 * instant one). The previous release's relay never reads it: it claims with now() (in
 * production tes_now() is now()) and builds the body from the execution's current state, as it
 * did; rows written before this migration have no snapshot, and the new relay does the same
 * for them. The trigger runs in the database, so every writer of a terminal state, old release
 * or new, gets the snapshot.
 *
 * Cost: the snapshot is computed once per statement that ends an execution, and only when an
 * endpoint subscribes (an uncorrelated sub-select, evaluated when the first row is inserted).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    ALTER TABLE webhook_deliveries ADD COLUMN execution_snapshot jsonb;

    CREATE OR REPLACE FUNCTION tes_execution_webhooks() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE written integer;
    BEGIN
      INSERT INTO webhook_deliveries (id, endpoint_id, project_id, execution_id, event_type, next_attempt_at, execution_snapshot)
      SELECT 'msg_' || replace(gen_random_uuid()::text, '-', ''), w.id, NEW.project_id, NEW.id, 'execution.' || NEW.status, tes_now(),
             (SELECT jsonb_build_object(
                'execution', jsonb_build_object(
                  'id', NEW.id, 'tool', NEW.tool, 'model', NEW.model, 'status', NEW.status, 'arguments', NEW.arguments,
                  'priceVersion', NEW.price_version, 'totalSteps', NEW.total_steps, 'reservedMicros', NEW.reserved_micros,
                  'chargedMicros', NEW.charged_micros, 'cancelRequested', NEW.cancel_requested, 'output', NEW.output,
                  'errorCode', NEW.error_code, 'errorMessage', NEW.error_message,
                  'createdAt', to_char(NEW.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
                  'startedAt', to_char(NEW.started_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
                  'finishedAt', to_char(NEW.finished_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')),
                'steps', coalesce((
                  SELECT jsonb_agg(jsonb_build_object(
                           'executionId', s.execution_id, 'index', s.index, 'name', s.name, 'status', s.status, 'costMicros', s.cost_micros,
                           'startedAt', to_char(s.started_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
                           'finishedAt', to_char(s.finished_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')) ORDER BY s.index)
                    FROM execution_steps s WHERE s.execution_id = NEW.id AND s.project_id = NEW.project_id), '[]'::jsonb)))
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

/** Back to migration 20261123000014's trigger (no snapshot, first attempt at now()). */
export async function down(knex: Knex): Promise<void> {
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
    ALTER TABLE webhook_deliveries DROP COLUMN execution_snapshot;
  `);
}
