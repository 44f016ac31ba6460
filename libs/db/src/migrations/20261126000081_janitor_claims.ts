import type { Knex } from 'knex';

/**
 * The janitor deletes objects without holding row locks (issue #26): it claims expired rows
 * (delete_claim, a token, and delete_claim_until, from tes_now()) in one short transaction,
 * deletes their objects outside any transaction, then marks deleted only the rows still
 * carrying its token (sweepExpired). A claim past its deadline is void: a later pass claims
 * the row again, so a janitor that dies in between loses track of nothing.
 *
 * A delete sent to object storage may take effect after its sender stopped waiting for it, so
 * a revived file must not keep the key an earlier life's delete may still hit: this release's
 * upload writes a revived file's bytes under a key of its own and revives with it
 * (recordUpload). The trigger covers the previous release during a rolling deploy or after a
 * rollback, whose revive keeps the row's key and then writes the bytes at the content's key
 * (`projects/<project>/uploads/<sha256>`):
 * - a row whose key is not the content's (revived by this release) gets the content's key,
 *   where that release's bytes go, and which no delete in flight targets;
 * - a row whose key is the content's, with a delete claimed and not yet over, is not revived:
 *   40001, which that gateway answers 503 service_unavailable with Retry-After (its client
 *   retries once the janitor is done);
 * and every revive ends the row's claim, so a janitor that wakes after its deadline cannot
 * mark the revived row deleted. No other write changes: the janitor's marks (deleted_at set,
 * the claim set or cleared), and expiry changes of rows that are live.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    ALTER TABLE files ADD COLUMN delete_claim uuid, ADD COLUMN delete_claim_until timestamptz;
    ALTER TABLE artifacts ADD COLUMN delete_claim uuid, ADD COLUMN delete_claim_until timestamptz;

    CREATE FUNCTION tes_files_revive_guard() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE
      content_key text := 'projects/' || NEW.project_id || '/uploads/' || NEW.sha256;
    BEGIN
      IF (OLD.deleted_at IS NOT NULL OR OLD.expires_at <= tes_now())
         AND NEW.deleted_at IS NULL AND NEW.expires_at > tes_now() THEN
        IF NEW.storage_key = OLD.storage_key THEN
          IF OLD.storage_key <> content_key THEN
            NEW.storage_key := content_key;
          ELSIF OLD.delete_claim_until > tes_now() THEN
            RAISE EXCEPTION 'file % is being deleted until %; retry after that', OLD.id, OLD.delete_claim_until
              USING ERRCODE = '40001';
          END IF;
        END IF;
        NEW.delete_claim := NULL;
        NEW.delete_claim_until := NULL;
      END IF;
      RETURN NEW;
    END $$;

    CREATE TRIGGER files_revive_guard BEFORE UPDATE ON files
      FOR EACH ROW EXECUTE FUNCTION tes_files_revive_guard();
  `);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    DROP TRIGGER files_revive_guard ON files;
    DROP FUNCTION tes_files_revive_guard();
    ALTER TABLE files DROP COLUMN delete_claim, DROP COLUMN delete_claim_until;
    ALTER TABLE artifacts DROP COLUMN delete_claim, DROP COLUMN delete_claim_until;
  `);
}
