import type { Knex } from 'knex';

/**
 * Push (issue #13): every visible change of an execution gets a version and a notification, and
 * every terminal (or needs_review) state its webhook deliveries, in the statement that makes it.
 *
 * - `change_seq` on executions and on execution_steps, from one sequence, set by BEFORE triggers
 *   when a field the public execution object shows changed. An execution's version is the
 *   greatest change_seq of its row and its steps. It orders changes as they commit: every write
 *   of a step holds the execution row (FOR SHARE) and every write of the execution row holds it
 *   exclusively, so two writes of one execution never take their numbers in one order and
 *   commit in the other.
 * - `pg_notify('tes_execution_changes', <execution id>)` from the same triggers: delivered when
 *   the transaction commits (never for one that rolls back), and once per transaction and id.
 * - Webhook endpoints per project, and one delivery row per (event, endpoint), inserted by an
 *   AFTER trigger when an execution enters succeeded, failed, cancelled or needs_review: there is
 *   no terminal state without its deliveries, whichever statement wrote it (settle, abandon,
 *   needs_review, resolve).
 *
 * The columns are added with a constant default (no table rewrite); rows written from now on
 * take the sequence.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE SEQUENCE tes_change_seq;
    ALTER TABLE executions ADD COLUMN change_seq bigint NOT NULL DEFAULT 0;
    ALTER TABLE executions ALTER COLUMN change_seq SET DEFAULT nextval('tes_change_seq');
    ALTER TABLE execution_steps ADD COLUMN change_seq bigint NOT NULL DEFAULT 0;
    ALTER TABLE execution_steps ALTER COLUMN change_seq SET DEFAULT nextval('tes_change_seq');

    CREATE FUNCTION tes_execution_changed() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF (NEW.status, NEW.cancel_requested, NEW.charged_micros, NEW.output, NEW.error_code, NEW.error_message,
          NEW.started_at, NEW.finished_at)
         IS DISTINCT FROM
         (OLD.status, OLD.cancel_requested, OLD.charged_micros, OLD.output, OLD.error_code, OLD.error_message,
          OLD.started_at, OLD.finished_at) THEN
        NEW.change_seq := nextval('tes_change_seq');
        PERFORM pg_notify('tes_execution_changes', NEW.id);
      END IF;
      RETURN NEW;
    END $$;
    CREATE TRIGGER executions_changed BEFORE UPDATE ON executions
      FOR EACH ROW EXECUTE FUNCTION tes_execution_changed();

    CREATE FUNCTION tes_step_changed() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF TG_OP = 'INSERT' OR (NEW.status, NEW.cost_micros, NEW.attempts, NEW.started_at, NEW.finished_at)
                             IS DISTINCT FROM (OLD.status, OLD.cost_micros, OLD.attempts, OLD.started_at, OLD.finished_at) THEN
        NEW.change_seq := nextval('tes_change_seq');
        PERFORM pg_notify('tes_execution_changes', NEW.execution_id);
      END IF;
      RETURN NEW;
    END $$;
    CREATE TRIGGER execution_steps_changed BEFORE INSERT OR UPDATE ON execution_steps
      FOR EACH ROW EXECUTE FUNCTION tes_step_changed();

    CREATE TABLE webhook_endpoints (
      id          text PRIMARY KEY,
      project_id  text NOT NULL REFERENCES projects(id),
      url         text NOT NULL,
      -- The signing key ("whsec_" + base64). Kept, not hashed: every delivery is signed with it.
      secret      text NOT NULL,
      events      text[] NOT NULL,
      created_at  timestamptz NOT NULL DEFAULT now(),
      deleted_at  timestamptz
    );
    CREATE INDEX webhook_endpoints_project_idx ON webhook_endpoints (project_id) WHERE deleted_at IS NULL;

    CREATE TABLE webhook_deliveries (
      -- The webhook-id header: one per (event, endpoint), the same on every attempt.
      id               text PRIMARY KEY,
      endpoint_id      text NOT NULL REFERENCES webhook_endpoints(id),
      project_id       text NOT NULL,
      execution_id     text NOT NULL REFERENCES executions(id),
      event_type       text NOT NULL,
      status           text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'failed')),
      -- The body and its timestamp, fixed by the first attempt so that every attempt sends the same event.
      payload          jsonb,
      event_at         timestamptz NOT NULL DEFAULT now(),
      attempts         integer NOT NULL DEFAULT 0,
      next_attempt_at  timestamptz NOT NULL DEFAULT now(),
      last_status_code integer,
      last_error       text,
      created_at       timestamptz NOT NULL DEFAULT now(),
      delivered_at     timestamptz
    );
    -- The deliverer claims due pending rows in this order.
    CREATE INDEX webhook_deliveries_due_idx ON webhook_deliveries (next_attempt_at) WHERE status = 'pending';
    CREATE INDEX webhook_deliveries_execution_idx ON webhook_deliveries (execution_id);

    CREATE FUNCTION tes_execution_webhooks() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      INSERT INTO webhook_deliveries (id, endpoint_id, project_id, execution_id, event_type)
      SELECT 'msg_' || replace(gen_random_uuid()::text, '-', ''), w.id, NEW.project_id, NEW.id, 'execution.' || NEW.status
        FROM webhook_endpoints w
       WHERE w.project_id = NEW.project_id AND w.deleted_at IS NULL AND ('execution.' || NEW.status) = ANY (w.events);
      RETURN NULL;
    END $$;
    CREATE TRIGGER executions_webhooks AFTER UPDATE OF status ON executions
      FOR EACH ROW
      WHEN (NEW.status IS DISTINCT FROM OLD.status AND NEW.status IN ('succeeded', 'failed', 'cancelled', 'needs_review'))
      EXECUTE FUNCTION tes_execution_webhooks();
  `);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    DROP TRIGGER executions_webhooks ON executions;
    DROP FUNCTION tes_execution_webhooks();
    DROP TABLE webhook_deliveries;
    DROP TABLE webhook_endpoints;
    DROP TRIGGER execution_steps_changed ON execution_steps;
    DROP FUNCTION tes_step_changed();
    DROP TRIGGER executions_changed ON executions;
    DROP FUNCTION tes_execution_changed();
    ALTER TABLE execution_steps DROP COLUMN change_seq;
    ALTER TABLE executions DROP COLUMN change_seq;
    DROP SEQUENCE tes_change_seq;
  `);
}
