import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';

/*
 * The writes of an OLDER release, verbatim: main at 5850d2b, before the migrations
 * 20261123000010-12 that made the database the judge of deadlines, uploads in use and first
 * claims (issue #11). Issue #26 found that when such code runs beside a newer schema (a rolling
 * deploy, a rollback of the images), it brings back three fixed defects: it submits with a NULL
 * lease_expires_at and writes no execution_files rows, its releaseLease sets the deadline to
 * NULL, and its claims do not count `claims`. The migrations 20261126000020-22 make the schema
 * enforce those rules whoever writes; expand-contract.test.ts runs these statements to prove it.
 *
 * The SQL text is copied as it was (positional bindings, the process's month, now()); RETURNING
 * lists are cut to what the tests read. Unlike statements.ts this module is not refreshed per
 * release: it is the worst writer the schema has had to survive so far.
 */

const monthKey = (at: Date = new Date()) => `${at.getUTCFullYear()}-${String(at.getUTCMonth() + 1).padStart(2, '0')}-01`;

const SUBMIT_SQL = `WITH p AS (
     UPDATE projects
        SET available_micros = available_micros - ?::bigint,
            reserved_micros = reserved_micros + ?::bigint
      WHERE id = ?
        AND available_micros >= ?::bigint
        AND (monthly_cap_micros IS NULL
             OR (CASE WHEN cap_month = ?::date THEN month_charged_micros ELSE 0 END)
                + reserved_micros + ?::bigint <= monthly_cap_micros)
      RETURNING id
   ), e AS (
     INSERT INTO executions (id, project_id, api_key_id, tool, model, category, status, arguments, price_version,
       total_steps, reserved_micros, idempotency_key, request_digest)
     SELECT ?::text, p.id, ?::text, ?::text, ?::text, ?::text, 'queued', ?::jsonb, ?::text, ?::int, ?::bigint, ?::text, ?::text FROM p
     RETURNING id, project_id
   ), o AS (
     INSERT INTO outbox (project_id, execution_id, routing_key, payload)
     SELECT e.project_id, e.id, ?::text, ?::jsonb FROM e
     RETURNING id
   ), l AS (
     INSERT INTO ledger_entries (transaction_id, project_id, execution_id, kind, account, amount_micros)
     SELECT ?::text, e.project_id, e.id, 'reserve', v.account, v.amount
       FROM e CROSS JOIN (VALUES ('available', -?::bigint), ('reserved', ?::bigint)) AS v(account, amount)
     RETURNING 1
   )
   SELECT e.*, (SELECT id FROM o) AS outbox_id FROM e`;

export interface OlderSubmit {
  id: string;
  projectId: string;
  apiKeyId: string;
  priceVersion: string;
  reservedMicros: number;
  idempotencyKey: string;
  arguments: Record<string, unknown>;
}

/** The submit: no deadline, no execution_files rows. True when it wrote the execution. */
export async function submit(db: Knex, input: OlderSubmit): Promise<boolean> {
  const r = input.reservedMicros;
  const month = monthKey();
  const res = await db.raw<{ rows: unknown[] }>(SUBMIT_SQL, [
    r,
    r,
    input.projectId,
    r,
    month,
    r,
    input.id,
    input.apiKeyId,
    'test.sleep',
    'sleep',
    'test',
    JSON.stringify(input.arguments),
    input.priceVersion,
    2,
    r,
    input.idempotencyKey,
    'd',
    'test',
    JSON.stringify({ executionId: input.id, projectId: input.projectId }),
    randomUUID(),
    r,
    r,
  ]);
  return res.rows.length > 0;
}

/** The claim: counts attempts, not `claims`; "first claim" guessed from attempts and the clock. */
export async function claim(db: Knex, id: string, owner: string, leaseTtlMs: number): Promise<{ firstClaim: boolean } | null> {
  const res = await db.raw<{ rows: { first_claim: boolean }[] }>(
    `UPDATE executions
        SET status = 'running', lease_owner = ?, lease_expires_at = now() + (? * interval '1 millisecond'),
            started_at = coalesce(started_at, now()),
            attempts = attempts + (CASE WHEN status = 'waiting' THEN 0 ELSE 1 END), updated_at = now()
      WHERE id = ? AND status IN ('queued', 'running', 'waiting')
        AND (lease_owner IS NULL OR lease_expires_at < now())
      RETURNING (attempts = 1 AND started_at = now()) AS first_claim`,
    [owner, leaseTtlMs, id],
  );
  const row = res.rows[0];
  return row ? { firstClaim: row.first_claim } : null;
}

export async function startStep(
  db: Knex,
  input: { executionId: string; projectId: string; index: number; owner: string; external?: boolean },
): Promise<boolean> {
  const res = await db.raw<{ rows: unknown[] }>(
    `INSERT INTO execution_steps (execution_id, project_id, index, name, status, external)
     SELECT e.id, e.project_id, ?, ?, 'running', ? FROM executions e
      WHERE e.id = ? AND e.project_id = ? AND e.lease_owner = ? AND e.status = 'running'
        FOR SHARE
     ON CONFLICT (execution_id, index) DO UPDATE
        SET status = 'running', attempts = execution_steps.attempts + 1, started_at = now(), finished_at = NULL, error_code = NULL
     RETURNING 1`,
    [input.index, `s${input.index}`, input.external ?? false, input.executionId, input.projectId, input.owner],
  );
  return res.rows.length > 0;
}

/** finishStep without artifacts (its artifact CTE takes an empty list). */
export async function finishStep(
  db: Knex,
  input: { executionId: string; index: number; owner: string; status: 'succeeded' | 'failed'; costMicros: number },
): Promise<boolean> {
  const res = await db.raw<{ rows: { n: number }[] }>(
    `WITH s AS (
       UPDATE execution_steps s
          SET status = ?, cost_micros = ?, checkpoint = ?::jsonb, external_ref = coalesce(?, s.external_ref),
              error_code = ?, finished_at = now()
        WHERE s.execution_id = ? AND s.index = ? AND s.status = 'running'
          AND EXISTS (SELECT 1 FROM executions e WHERE e.id = s.execution_id AND e.lease_owner = ? AND e.status = 'running' FOR SHARE)
        RETURNING s.execution_id, s.project_id, s.index
     )
     SELECT count(*)::int AS n FROM s`,
    [input.status, input.costMicros, null, null, null, input.executionId, input.index, input.owner],
  );
  return (res.rows[0]?.n ?? 0) > 0;
}

/** releaseLease: the deadline goes to NULL (a knex builder update in that release). */
export async function releaseLease(db: Knex, id: string, owner: string): Promise<boolean> {
  const n = await db('executions')
    .where({ id, lease_owner: owner, status: 'running' })
    .update({ lease_owner: null, lease_expires_at: null, updated_at: db.fn.now() });
  return n > 0;
}
