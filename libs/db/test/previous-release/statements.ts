import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';

/*
 * The writes of the PREVIOUS RELEASE, verbatim (main at 68a1570, the last release before the
 * migrations 20261126000020-22), as its pods run them against the newest schema during a rolling
 * deploy or after a rollback of the images (deploy/README.md, "Expand/contract").
 *
 * REFRESH THIS MODULE AT EACH RELEASE: replace these statements (and LAST_MIGRATION) with the
 * ones of the release being replaced (its libs/db/src), so expand-contract.test.ts keeps proving
 * that a migration leaves the writes of the code still running beside it safe. The SQL text (SET, WHERE, fences)
 * is copied as it was; RETURNING lists are cut to what the tests read, and the binding helpers
 * (prepared statements, knex builders) are replaced by plain db.raw with the same bindings.
 *
 * What this release trusted its own code with: it fences every write by the bare worker id
 * (`lease_owner = :owner`), counts `claims` and calls `claims = 1` a first claim, writes a
 * deadline and the execution_files rows at submit, and its startStep keeps a restarted step's
 * external_ref and checkpoint.
 */

/** The last migration the previous release shipped with: the ones after it run beside its code. */
export const LAST_MIGRATION = '20261123000017_outbox_trace_context';

const OUTBOX = `INSERT INTO outbox (project_id, execution_id, routing_key, payload, trace_context)
     SELECT e.project_id, e.id, e.category,
            jsonb_build_object('executionId', e.id, 'projectId', e.project_id), :traceparent::text
       FROM e
     RETURNING id, routing_key, payload, trace_context`;

/** submit.ts SUBMIT_SQL (the outbox part is insertOutboxSql('e', ':traceparent::text') expanded). */
const SUBMIT_SQL = `WITH f AS (
     SELECT id FROM files
      WHERE project_id = :projectId AND id = ANY(:fileIds::text[]) AND deleted_at IS NULL AND expires_at > tes_now()
        FOR SHARE
   ), p AS (
     UPDATE projects
        SET available_micros = available_micros - :reserved::bigint,
            reserved_micros = reserved_micros + :reserved::bigint
      WHERE id = :projectId
        AND available_micros >= :reserved::bigint
        AND (monthly_cap_micros IS NULL
             OR (CASE WHEN cap_month >= tes_month() THEN month_charged_micros ELSE 0 END)
                + reserved_micros + :reserved::bigint <= monthly_cap_micros)
        AND (SELECT count(*) FROM f) = cardinality(:fileIds::text[])
        AND tes_submit_guard(:bindingLock, :priceVersion)
        AND NOT EXISTS (SELECT 1 FROM executions b WHERE b.project_id = :projectId AND b.idempotency_key = :idempotencyKey)
      RETURNING id
   ), e AS (
     INSERT INTO executions (id, project_id, api_key_id, tool, model, category, status, arguments, price_version,
       total_steps, reserved_micros, idempotency_key, request_digest, lease_expires_at, created_at)
     SELECT :id::text, p.id, :apiKeyId::text, :tool::text, :model::text, :category::text, 'queued', :arguments::jsonb,
            :priceVersion::text, :totalSteps::int, :reserved::bigint, :idempotencyKey::text, :requestDigest::text,
            tes_now() + (:dispatchDeadlineMs::int * interval '1 millisecond'), tes_now() FROM p
     RETURNING id, project_id, category
   ), ef AS (
     INSERT INTO execution_files (execution_id, file_id, project_id)
     SELECT e.id, f.id, e.project_id FROM e CROSS JOIN f
     RETURNING 1
   ), o AS (
     ${OUTBOX}
   ), l AS (
     INSERT INTO ledger_entries (transaction_id, project_id, execution_id, kind, account, amount_micros)
     SELECT :transactionId::text, e.project_id, e.id, 'reserve', v.account, v.amount
       FROM e CROSS JOIN (VALUES ('available', -:reserved::bigint), ('reserved', :reserved::bigint)) AS v(account, amount)
     RETURNING 1
   )
   SELECT e.id FROM e CROSS JOIN o`;

export interface PreviousSubmit {
  id: string;
  projectId: string;
  apiKeyId: string;
  priceVersion: string;
  reservedMicros: number;
  idempotencyKey: string;
  arguments: Record<string, unknown>;
  fileIds?: string[];
  dispatchDeadlineMs: number;
}

/** The submit; true when it wrote the execution. */
export async function submit(db: Knex, input: PreviousSubmit): Promise<boolean> {
  const res = await db.raw<{ rows: unknown[] }>(SUBMIT_SQL, {
    projectId: input.projectId,
    fileIds: input.fileIds ?? [],
    reserved: input.reservedMicros,
    bindingLock: `tes.binding:${input.projectId}:${input.idempotencyKey}`,
    priceVersion: input.priceVersion,
    id: input.id,
    apiKeyId: input.apiKeyId,
    tool: 'test.sleep',
    model: 'sleep',
    category: 'test',
    arguments: JSON.stringify(input.arguments),
    totalSteps: 2,
    idempotencyKey: input.idempotencyKey,
    requestDigest: 'd',
    dispatchDeadlineMs: input.dispatchDeadlineMs,
    transactionId: randomUUID(),
    traceparent: null,
  });
  return res.rows.length > 0;
}

/** lease.ts claimExecution: the bare worker id as the lease, `claims = 1` as "first claim". */
export async function claim(db: Knex, id: string, owner: string, leaseTtlMs: number): Promise<{ leaseOwner: string; firstClaim: boolean } | null> {
  const res = await db.raw<{ rows: { lease_owner: string; first_claim: boolean }[] }>(
    `UPDATE executions
        SET status = 'running', lease_owner = :owner, lease_expires_at = tes_now() + (:leaseTtlMs * interval '1 millisecond'),
            started_at = coalesce(started_at, tes_now()), claims = claims + 1, updated_at = now()
      WHERE id = :id AND status IN ('queued', 'running', 'waiting')
        AND (lease_owner IS NULL OR lease_expires_at < tes_now())
      RETURNING lease_owner, (claims = 1) AS first_claim`,
    { owner, leaseTtlMs, id },
  );
  const row = res.rows[0];
  return row ? { leaseOwner: row.lease_owner, firstClaim: row.first_claim } : null;
}

export async function renewLease(db: Knex, id: string, owner: string, leaseTtlMs: number): Promise<boolean> {
  const res = await db.raw<{ rows: unknown[] }>(
    `UPDATE executions SET lease_expires_at = tes_now() + (:leaseTtlMs * interval '1 millisecond')
      WHERE id = :id AND lease_owner = :owner AND status = 'running'
      RETURNING cancel_requested`,
    { leaseTtlMs, id, owner },
  );
  return res.rows.length > 0;
}

/** steps.ts startStep: 'started', 'cancel_requested' or 'lease_lost'. Its restart keeps external_ref and checkpoint. */
export async function startStep(
  db: Knex,
  input: { executionId: string; projectId: string; index: number; owner: string; external?: boolean },
): Promise<string> {
  const res = await db.raw<{ rows: { cancel_requested: boolean }[] }>(
    `WITH e AS (
       SELECT id, project_id, cancel_requested FROM executions
        WHERE id = :executionId AND project_id = :projectId AND lease_owner = :owner AND status = 'running'
          FOR SHARE
     ), s AS (
       INSERT INTO execution_steps (execution_id, project_id, index, name, status, external)
       SELECT e.id, e.project_id, :index, :name, 'running', :external FROM e WHERE NOT e.cancel_requested
       ON CONFLICT (execution_id, index) DO UPDATE
          SET status = 'running', attempts = execution_steps.attempts + 1, started_at = now(), finished_at = NULL, error_code = NULL
       RETURNING 1
     )
     SELECT e.cancel_requested FROM e`,
    { ...input, name: `s${input.index}`, external: input.external ?? false },
  );
  const row = res.rows[0];
  if (!row) return 'lease_lost';
  return row.cancel_requested ? 'cancel_requested' : 'started';
}

export async function recordExternalRef(db: Knex, input: { executionId: string; index: number; owner: string; externalRef: string }): Promise<boolean> {
  const res = await db.raw<{ rows: unknown[] }>(
    `UPDATE execution_steps s SET external_ref = :externalRef, checkpoint = coalesce(:checkpoint::jsonb, s.checkpoint)
      WHERE s.execution_id = :executionId AND s.index = :index AND s.status = 'running'
        AND EXISTS (SELECT 1 FROM executions e WHERE e.id = s.execution_id AND e.lease_owner = :owner AND e.status = 'running' FOR SHARE)
      RETURNING 1`,
    { ...input, checkpoint: null },
  );
  return res.rows.length > 0;
}

/** steps.ts finishStep (FINISH_STEP_CTES), without artifacts. */
export async function finishStep(
  db: Knex,
  input: { executionId: string; index: number; owner: string; status: 'succeeded' | 'failed'; costMicros: number },
): Promise<boolean> {
  const res = await db.raw<{ rows: { n: number }[] }>(
    `WITH s AS (
       UPDATE execution_steps s
          SET status = :stepStatus, cost_micros = :stepCostMicros, checkpoint = :stepCheckpoint::jsonb,
              external_ref = coalesce(:stepExternalRef, s.external_ref), error_code = :stepErrorCode, finished_at = now()
        WHERE s.execution_id = :stepExecutionId AND s.index = :stepIndex AND s.status = 'running'
          AND EXISTS (SELECT 1 FROM executions e WHERE e.id = s.execution_id AND e.lease_owner = :stepOwner AND e.status = 'running' FOR SHARE)
        RETURNING s.execution_id, s.project_id, s.index
     )
     SELECT count(*)::int AS n FROM s`,
    {
      stepStatus: input.status,
      stepCostMicros: input.costMicros,
      stepCheckpoint: null,
      stepExternalRef: null,
      stepErrorCode: null,
      stepExecutionId: input.executionId,
      stepIndex: input.index,
      stepOwner: input.owner,
    },
  );
  return (res.rows[0]?.n ?? 0) > 0;
}

export async function enterWaiting(db: Knex, input: { executionId: string; owner: string; recheckDeadlineMs: number }): Promise<boolean> {
  const moved = await db.raw<{ rows: unknown[] }>(
    `UPDATE executions SET status = 'waiting', lease_owner = NULL,
            lease_expires_at = tes_now() + (:recheckDeadlineMs * interval '1 millisecond'), updated_at = now()
      WHERE id = :executionId AND lease_owner = :owner AND status = 'running'
      RETURNING 1`,
    input,
  );
  return moved.rows.length > 0;
}

export async function releaseLease(db: Knex, id: string, owner: string, recheckDeadlineMs: number): Promise<boolean> {
  const res = await db.raw<{ rows: unknown[] }>(
    `UPDATE executions SET lease_owner = NULL, lease_expires_at = tes_now() + (:recheckDeadlineMs * interval '1 millisecond'), updated_at = now()
      WHERE id = :id AND lease_owner = :owner AND status = 'running'
      RETURNING 1`,
    { recheckDeadlineMs, id, owner },
  );
  return res.rows.length > 0;
}

/** settle.ts settleExecution with the lease fence; the charged micros, or null when fenced out. */
export async function settle(
  db: Knex,
  input: { executionId: string; projectId: string; status: 'succeeded' | 'failed' | 'cancelled'; chargedMicros: number; leaseOwner: string },
): Promise<number | null> {
  const res = await db.raw<{ rows: { charged_micros: number }[] }>(
    `WITH e AS (
       UPDATE executions
          SET status = :status, charged_micros = LEAST(:chargedMicros::bigint, reserved_micros), output = :output::jsonb,
              error_code = :errorCode, error_message = :errorMessage, cancel_requested = cancel_requested OR :cancelRequested::boolean,
              finished_at = tes_now(), settled_at = tes_now(), updated_at = now(),
              lease_owner = NULL, lease_expires_at = NULL
        WHERE id = :executionId AND project_id = :projectId AND status = ANY(:from::text[]) AND lease_owner = :leaseOwner
        RETURNING id, project_id, tool, reserved_micros, charged_micros, created_at
     ), p AS (
       UPDATE projects
          SET reserved_micros = projects.reserved_micros - e.reserved_micros,
              available_micros = projects.available_micros + e.reserved_micros - e.charged_micros,
              month_charged_micros = (CASE WHEN cap_month >= tes_month() THEN month_charged_micros ELSE 0 END) + e.charged_micros,
              cap_month = GREATEST(cap_month, tes_month())
         FROM e WHERE projects.id = e.project_id
        RETURNING projects.id
     ), u AS (
       INSERT INTO usage_counters (project_id, month, execution_count, charged_micros)
       SELECT e.project_id, tes_month(), 1, e.charged_micros FROM e
       ON CONFLICT (project_id, month) DO UPDATE
          SET execution_count = usage_counters.execution_count + 1,
              charged_micros = usage_counters.charged_micros + excluded.charged_micros
       RETURNING 1
     ), l AS (
       INSERT INTO ledger_entries (transaction_id, project_id, execution_id, kind, account, amount_micros)
       SELECT :transactionId, e.project_id, e.id, :kind, v.account, v.amount
         FROM e CROSS JOIN LATERAL (VALUES
           ('reserved', -e.reserved_micros),
           ('available', e.reserved_micros - e.charged_micros),
           ('charged', e.charged_micros)) AS v(account, amount)
       RETURNING 1
     )
     SELECT e.id, e.tool, e.reserved_micros, e.charged_micros, e.created_at FROM e`,
    {
      status: input.status,
      chargedMicros: input.chargedMicros,
      output: null,
      errorCode: null,
      errorMessage: null,
      cancelRequested: false,
      executionId: input.executionId,
      projectId: input.projectId,
      from: ['running'],
      leaseOwner: input.leaseOwner,
      transactionId: randomUUID(),
      kind: 'settle',
    },
  );
  return res.rows[0]?.charged_micros ?? null;
}
