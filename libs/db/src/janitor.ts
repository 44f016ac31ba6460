import type { Knex } from 'knex';

export interface ExpiredObject {
  id: string;
  storageKey: string;
}

/**
 * Deletes stored files past their deadline: claims a batch of expired uploads or artifacts
 * (FOR UPDATE SKIP LOCKED: two relays share the work), deletes each object while the rows
 * are locked, and marks only the rows whose object is gone. A re-upload of the same content
 * waits on the row lock, then revives the row and writes its object again (upload route).
 * Indexes: files_expiry_idx, artifacts_expiry_idx.
 */
export async function sweepExpired(
  db: Knex,
  table: 'files' | 'artifacts',
  limit: number,
  deleteObject: (key: string) => Promise<void>,
): Promise<{ deleted: number; failed: number }> {
  return db.transaction(async (trx) => {
    const res = await trx.raw<{ rows: { id: string; storage_key: string }[] }>(
      `SELECT id, storage_key FROM ${table}
        WHERE deleted_at IS NULL AND expires_at < now()
        ORDER BY expires_at LIMIT ? FOR UPDATE SKIP LOCKED`,
      [limit],
    );
    const done: string[] = [];
    let failed = 0;
    for (const row of res.rows) {
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

/** Rate-limit windows that ended over an hour ago (rate-limiter-flexible stores ms). */
export async function deleteStaleRateLimits(db: Knex, nowMs: number = Date.now()): Promise<number> {
  return db('rate_limits').where('expire', '<', nowMs - 3_600_000).delete();
}
