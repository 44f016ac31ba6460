import type { Knex } from 'knex';

/** Statuses in which an execution may still read its input files. */
const OPEN_STATUSES = `('queued', 'running', 'waiting', 'needs_review')`;

/**
 * Deletes stored files past their deadline: claims a batch of expired uploads or artifacts
 * (FOR UPDATE SKIP LOCKED: two relays share the work), deletes each object while the rows
 * are locked, and marks only the rows whose object is gone. A re-upload of the same content
 * waits on the row lock, then revives the row and writes its object again (upload route).
 *
 * An upload that an execution not yet ended reads is kept until that execution ends (its
 * expiresAt, the caller's 30-day promise, does not change). The check runs twice: in the claim,
 * so such files do not fill every batch, and again after the rows are locked, in a statement
 * of its own, because a submit that committed while the claim waited for its snapshot holds
 * no lock any more but is visible only to a later statement. A submit still in flight holds
 * its files FOR SHARE, so the claim skips them. Indexes: files_expiry_idx, artifacts_expiry_idx,
 * execution_files_file_idx.
 */
export async function sweepExpired(
  db: Knex,
  table: 'files' | 'artifacts',
  limit: number,
  deleteObject: (key: string) => Promise<void>,
): Promise<{ deleted: number; failed: number }> {
  const inUse = (alias: string) =>
    table === 'files'
      ? `AND NOT EXISTS (SELECT 1 FROM execution_files ef JOIN executions e ON e.id = ef.execution_id
                          WHERE ef.file_id = ${alias}.id AND e.status IN ${OPEN_STATUSES})`
      : '';
  return db.transaction(async (trx) => {
    const res = await trx.raw<{ rows: { id: string; storage_key: string }[] }>(
      `SELECT id, storage_key FROM ${table} t
        WHERE deleted_at IS NULL AND expires_at < tes_now() ${inUse('t')}
        ORDER BY expires_at LIMIT :limit FOR UPDATE SKIP LOCKED`,
      { limit },
    );
    let rows = res.rows;
    if (table === 'files' && rows.length > 0) {
      const still = await trx.raw<{ rows: { id: string }[] }>(`SELECT t.id FROM files t WHERE t.id = ANY(:ids::text[]) ${inUse('t')}`, {
        ids: rows.map((r) => r.id),
      });
      const free = new Set(still.rows.map((r) => r.id));
      rows = rows.filter((r) => free.has(r.id));
    }
    const done: string[] = [];
    let failed = 0;
    for (const row of rows) {
      try {
        await deleteObject(row.storage_key);
        done.push(row.id);
      } catch {
        failed++;
      }
    }
    if (done.length > 0) await trx(table).whereIn('id', done).update({ deleted_at: trx.fn.now() });
    return { deleted: done.length, failed };
  });
}
