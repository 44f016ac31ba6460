/** Who holds an execution: claim, renew, give back, wait on a provider, hand to an operator. */
import type { Knex } from 'knex';
import type { ExecutionStatus } from '@tes/core';
import { prepared } from '../prepared';
import { EXECUTION_SELECT, toExecution, type ExecutionRecord, type ExecutionRow } from './records';
import { statusGuard } from './status-guard';

/** A claimed execution, as the claim left it. */
export type ClaimedExecution = ExecutionRecord & {
  /**
   * The lease this claim holds, `<owner>:<claim number>` (also in leaseOwner): the value every
   * fenced write of this run passes as its owner. Fresh at each claim, so a stale run of the same
   * worker, which lost its lease and was re-dispatched to that worker again, is fenced out.
   */
  lease: string;
  /** Whether any step was recorded when the claim took the row; if not, the caller need not read them. */
  stepsRecorded: boolean;
};

/**
 * Claims an execution for a worker with a lease. Succeeds for queued work, for running
 * work whose lease has expired or was released, and for waiting work (a provider re-check).
 * Returns null when the execution is terminal, waiting for an operator, or held by a live
 * lease. A claim spends no attempt: only a lease lost to a crash or a hang does (the reaper
 * counts those), so hand-backs at shutdown and re-checks never wear an execution out.
 *
 * The lease owner written is `owner` and the claim's number (`claims` after it): a per-claim
 * token, not the worker's id alone. The worker's id alone let a stale run of a process keep
 * writing after the same process had claimed the execution again (issue #26, defect 2). The
 * previous release fenced with its bare worker id; such an id never equals a lease written here
 * (it has no ':'), so old and new workers fence each other out during a rolling deploy.
 *
 * `stepsRecorded` comes from the steps that exist, read by tes_steps_recorded() with a fresh
 * snapshot after this UPDATE holds the row (migration 20261126000022): a subquery here would see
 * the snapshot taken before the UPDATE waited for the row lock, and could miss what the previous
 * lease holder recorded meanwhile; and `claims` is no witness, for an older release's claims did
 * not count it. Index: the primary key.
 */
export async function claimExecution(db: Knex, id: string, owner: string, leaseTtlMs: number): Promise<ClaimedExecution | null> {
  return claimByIdFrom(db, 'tes_claim', ['queued', 'running', 'waiting'], { owner, leaseTtlMs, id });
}

/** A claimed execution's row: the execution's columns and whether it has steps (tes_steps_recorded, read after the claim). */
export type ClaimRow = ExecutionRow & { steps_recorded: boolean };

/** The execution a claim's statement returned, with its lease; null when it claimed nothing. */
export function claimedFrom(rows: ClaimRow[]): ClaimedExecution | null {
  const row = rows[0];
  if (!row) return null;
  const e = toExecution(row);
  return { ...e, lease: e.leaseOwner!, stepsRecorded: row.steps_recorded };
}

/**
 * A claim by id from the given states, when its lease is free or expired: the claim's lease is
 * `<owner>:<claims>`, until the database's clock plus the TTL (claimExecution, resumeExecution).
 */
export async function claimByIdFrom(
  db: Knex,
  name: string,
  from: ExecutionStatus[],
  bindings: { owner: string; leaseTtlMs: number; id: string },
): Promise<ClaimedExecution | null> {
  const res = await prepared<{ rows: ClaimRow[] }>(
    db,
    name,
    `UPDATE executions
        SET status = 'running', lease_owner = :owner || ':' || (claims + 1),
            lease_expires_at = tes_now() + (:leaseTtlMs * interval '1 millisecond'),
            started_at = coalesce(started_at, tes_now()), claims = claims + 1, updated_at = now()
      WHERE id = :id AND ${statusGuard('status', from)}
        AND (lease_owner IS NULL OR lease_expires_at < tes_now())
      RETURNING ${EXECUTION_SELECT}, tes_steps_recorded(id) AS steps_recorded`,
    bindings,
  );
  return claimedFrom(res.rows);
}

/**
 * Extends the lease; null means it was lost (expired and taken, or the execution moved on).
 * `owner` here and in every fenced write is the claim's lease (ClaimedExecution.lease).
 */
export async function renewLease(db: Knex, id: string, owner: string, leaseTtlMs: number): Promise<{ cancelRequested: boolean } | null> {
  const res = await prepared<{ rows: { cancel_requested: boolean }[] }>(
    db,
    'tes_renew_lease',
    `UPDATE executions SET lease_expires_at = tes_now() + (:leaseTtlMs * interval '1 millisecond')
      WHERE id = :id AND lease_owner = :owner AND ${statusGuard('status', ['running'])}
      RETURNING cancel_requested`,
    { leaseTtlMs, id, owner },
  );
  const row = res.rows[0];
  return row ? { cancelRequested: row.cancel_requested } : null;
}

/**
 * A step handed work to an external provider and must wait for it: the execution moves to
 * `waiting` and frees its lease. lease_expires_at becomes the deadline by which a re-check must
 * have happened: the worker sends a delayed message for it after this commit (its one way of
 * "come back later"), and past the deadline the reaper publishes one itself, so a lost or
 * never-sent message cannot strand the execution. False: the lease was lost.
 */
export async function enterWaiting(db: Knex, input: { executionId: string; owner: string; recheckDeadlineMs: number }): Promise<boolean> {
  const moved = await db.raw<{ rows: unknown[] }>(
    `UPDATE executions SET status = 'waiting', lease_owner = NULL,
            lease_expires_at = tes_now() + (:recheckDeadlineMs * interval '1 millisecond'), updated_at = now()
      WHERE id = :executionId AND lease_owner = :owner AND ${statusGuard('status', ['running'])}
      RETURNING 1`,
    input,
  );
  return moved.rows.length > 0;
}

/** Moves an execution to needs_review, keeping its reservation held (no settlement). */
export async function markNeedsReview(db: Knex, input: { executionId: string; owner?: string; errorCode: string; errorMessage: string }): Promise<boolean> {
  // Without an owner (an operator, the relay), any holder's lease is overridden.
  const res = await db.raw<{ rows: unknown[] }>(
    `UPDATE executions SET status = 'needs_review', error_code = :errorCode, error_message = :errorMessage, lease_owner = NULL,
            lease_expires_at = NULL, updated_at = now()
      WHERE id = :executionId AND ${statusGuard('status', ['running', 'waiting'])} AND (:owner::text IS NULL OR lease_owner = :owner::text)
      RETURNING 1`,
    { executionId: input.executionId, errorCode: input.errorCode, errorMessage: input.errorMessage, owner: input.owner ?? null },
  );
  return res.rows.length > 0;
}

/**
 * Gives a lease back early (shutdown, transient failure) so a redelivery can claim at once.
 * The execution keeps a deadline: the worker re-sends its message through a delay queue, and
 * if that message is lost the reaper publishes one when `recheckDeadlineMs` has passed. (A
 * NULL deadline would never be "past": the execution would stay running with its money held.)
 */
export async function releaseLease(db: Knex, id: string, owner: string, recheckDeadlineMs: number): Promise<boolean> {
  const res = await db.raw<{ rows: unknown[] }>(
    `UPDATE executions SET lease_owner = NULL, lease_expires_at = tes_now() + (:recheckDeadlineMs * interval '1 millisecond'), updated_at = now()
      WHERE id = :id AND lease_owner = :owner AND ${statusGuard('status', ['running'])}
      RETURNING 1`,
    { recheckDeadlineMs, id, owner },
  );
  return res.rows.length > 0;
}
