import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';

/** Statuses in which an execution may still read its input files. */
const OPEN_STATUSES = `('queued', 'running', 'waiting', 'needs_review')`;

/** A claim's deadline lies this far past its deletes' own bound: room for the claim's commit and the mark after. */
const CLAIM_MARGIN_MS = 5_000;

export interface SweepOptions {
  /** One object's delete, retries included; its signal is aborted then. Default 10 s. */
  deleteTimeoutMs?: number;
  /** Objects deleted at once, under one claim. Default 16. */
  concurrency?: number;
  /** The owner is stopping: no new round is claimed, and the round's deletes are aborted (their rows let go). */
  signal?: AbortSignal;
}

/**
 * Deletes stored files past their deadline, holding no row lock while it talks to object
 * storage (issue #26: a delete inside the claim's transaction held the rows, and a re-upload
 * waited on them, for as long as the store took to answer, forever if it never did). Per round of up to `concurrency`
 * rows:
 *
 * 1. claim (one short transaction): lock expired rows FOR UPDATE SKIP LOCKED (two relays share
 *    the work; a row another claim holds and whose deadline has not passed is skipped), and
 *    stamp them with a token and a deadline from tes_now(): the delete timeout and a margin;
 * 2. delete their objects, outside any transaction, all bounded by one signal;
 * 3. mark deleted the rows whose object is gone and that still carry the token; let go of the
 *    others (their claim cleared; a later pass retries them). After a failure the round's rest
 *    waits for the next pass: the store is likely unwell.
 *
 * A crash between 1 and 3 loses nothing: the rows are not deleted, and once the deadline has
 * passed another pass claims them again. No delete starts late: if the claim took longer than
 * the margin, its rows are let go untouched, so this process has stopped waiting on every
 * delete by the deadline. A delete may still take effect later than that (the request was
 * sent), so a re-upload never waits for the janitor: a revived file gets a storage key of its
 * own (recordUpload; the trigger of migration 20261126000081 does the same for older code),
 * and reviving clears the claim, so the janitor's mark then matches nothing.
 *
 * An upload that an execution not yet ended reads is kept until that execution ends (its
 * expiresAt, the caller's 30-day promise, does not change). The check runs twice: in the
 * lock, so such files do not fill every round, and again in the statement that claims, a
 * statement of its own, because a submit that committed while the lock waited for its snapshot
 * holds no lock any more but is visible only to a later statement. A submit still in flight
 * holds its files FOR SHARE, so the lock skips them. Indexes: files_expiry_idx,
 * artifacts_expiry_idx, execution_files_file_idx.
 */
export async function sweepExpired(
  db: Knex,
  table: 'files' | 'artifacts',
  limit: number,
  deleteObject: (key: string, signal: AbortSignal) => Promise<void>,
  options: SweepOptions = {},
): Promise<{ deleted: number; failed: number }> {
  const deleteTimeoutMs = options.deleteTimeoutMs ?? 10_000;
  const concurrency = Math.max(1, options.concurrency ?? 16);
  let deleted = 0;
  let failed = 0;
  while (deleted + failed < limit && !options.signal?.aborted) {
    const asked = performance.now();
    const claim = await claimExpired(db, table, Math.min(concurrency, limit - deleted - failed), deleteTimeoutMs + CLAIM_MARGIN_MS);
    if (claim.rows.length === 0) break;
    const ids = claim.rows.map((r) => r.id);
    if (performance.now() - asked > CLAIM_MARGIN_MS || options.signal?.aborted) {
      // too late to start (a delete could outlast the claim), or the owner stopped meanwhile
      await releaseClaims(db, table, claim.token, ids);
      failed += ids.length;
      break;
    }
    const outcomes = await withinRound(deleteTimeoutMs, options.signal, (signal) =>
      Promise.allSettled(claim.rows.map((r) => deleteObject(r.storage_key, signal))),
    );
    const done = ids.filter((_, i) => outcomes[i]!.status === 'fulfilled');
    const undone = ids.filter((_, i) => outcomes[i]!.status === 'rejected');
    if (done.length > 0) {
      await db(table)
        .whereIn('id', done)
        .where({ delete_claim: claim.token })
        .update({ deleted_at: db.fn.now(), delete_claim: null, delete_claim_until: null });
    }
    if (undone.length > 0) await releaseClaims(db, table, claim.token, undone);
    deleted += done.length;
    failed += undone.length;
    if (undone.length > 0) break;
  }
  return { deleted, failed };
}

/**
 * Runs a round's deletes under one signal, aborted at the round's bound or when `stop` aborts.
 * A controller per round, its listener on `stop` removed after: nothing of a round outlives it
 * on the owner's long-lived signal (AbortSignal.any's composites are only weakly held there).
 */
async function withinRound<T>(ms: number, stop: AbortSignal | undefined, run: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const round = new AbortController();
  const timer = setTimeout(() => round.abort(new Error(`the round's deletes outlasted ${ms} ms`)), ms);
  const onStop = () => round.abort(stop!.reason);
  stop?.addEventListener('abort', onStop, { once: true });
  try {
    return await run(round.signal);
  } finally {
    clearTimeout(timer);
    stop?.removeEventListener('abort', onStop);
  }
}

/** Step 1 of sweepExpired: rows past their deadline, stamped with a new claim (one short transaction). */
async function claimExpired(
  db: Knex,
  table: 'files' | 'artifacts',
  limit: number,
  leaseMs: number,
): Promise<{ token: string; rows: { id: string; storage_key: string }[] }> {
  const inUse = (alias: string) =>
    table === 'files'
      ? `AND NOT EXISTS (SELECT 1 FROM execution_files ef JOIN executions e ON e.id = ef.execution_id
                          WHERE ef.file_id = ${alias}.id AND e.status IN ${OPEN_STATUSES})`
      : '';
  const token = randomUUID();
  const rows = await db.transaction(async (trx) => {
    const locked = await trx.raw<{ rows: { id: string }[] }>(
      `SELECT id FROM ${table} t
        WHERE deleted_at IS NULL AND expires_at < tes_now() AND (delete_claim IS NULL OR delete_claim_until <= tes_now()) ${inUse('t')}
        ORDER BY expires_at LIMIT :limit FOR UPDATE SKIP LOCKED`,
      { limit },
    );
    if (locked.rows.length === 0) return [];
    const claimed = await trx.raw<{ rows: { id: string; storage_key: string }[] }>(
      `UPDATE ${table} t SET delete_claim = :token, delete_claim_until = tes_now() + (:leaseMs::int * interval '1 millisecond')
        WHERE t.id = ANY(:ids::text[]) ${inUse('t')}
        RETURNING t.id, t.storage_key`,
      { token, leaseMs, ids: locked.rows.map((r) => r.id) },
    );
    return claimed.rows;
  });
  return { token, rows };
}

/** Lets go of claimed rows whose object was not deleted: a later pass tries them again. */
async function releaseClaims(db: Knex, table: 'files' | 'artifacts', token: string, ids: string[]): Promise<void> {
  await db(table).whereIn('id', ids).where({ delete_claim: token }).update({ delete_claim: null, delete_claim_until: null });
}
