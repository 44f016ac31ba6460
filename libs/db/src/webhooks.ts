/**
 * Webhooks (issue #13): endpoints per project, and their deliveries. A delivery row is written
 * by a trigger in the statement that makes its execution terminal (migration 20261123000013);
 * the relay's deliverer claims due rows, sends them outside any transaction and records the
 * outcome here.
 */
import { randomBytes } from 'node:crypto';
import type { Knex } from 'knex';
import { newId } from '@tes/core';
import type { PublicExecutionFields, PublicStepFields } from './executions';
import { iso } from './time';

/** The events an endpoint may subscribe to (all of them by default). */
export const WEBHOOK_EVENTS = ['execution.succeeded', 'execution.failed', 'execution.cancelled', 'execution.needs_review'] as const;
export type WebhookEvent = (typeof WEBHOOK_EVENTS)[number];

/** Notified (empty payload) when deliveries were written: a relay looks for due ones at once. */
export const WEBHOOK_DELIVERIES_CHANNEL = 'tes_webhook_deliveries';

/** The channel the triggers notify with an execution id when a visible field of it changed. */
export const EXECUTION_CHANGES_CHANNEL = 'tes_execution_changes';

/** Why a delivery whose endpoint was deleted ends without being sent. */
const ENDPOINT_DELETED = 'the endpoint was deleted';

export interface WebhookEndpoint {
  id: string;
  projectId: string;
  url: string;
  events: WebhookEvent[];
  createdAt: string;
}

/** Registers an endpoint; the secret is returned here only (Standard Webhooks: "whsec_" + base64 of 24 random bytes). */
export async function createWebhookEndpoint(
  db: Knex,
  input: { projectId: string; url: string; events?: readonly WebhookEvent[] },
): Promise<WebhookEndpoint & { secret: string }> {
  const secret = `whsec_${randomBytes(24).toString('base64')}`;
  const [row] = await db('webhook_endpoints')
    .insert({ id: newId('whk'), project_id: input.projectId, url: input.url, secret, events: [...(input.events ?? WEBHOOK_EVENTS)] })
    .returning<Record<string, unknown>[]>(['id', 'project_id', 'url', 'events', 'created_at']);
  return { ...toEndpoint(row!), secret };
}

export async function listWebhookEndpoints(db: Knex, projectId: string): Promise<WebhookEndpoint[]> {
  const rows = await db('webhook_endpoints')
    .select('id', 'project_id', 'url', 'events', 'created_at')
    .where({ project_id: projectId })
    .whereNull('deleted_at')
    .orderBy('id');
  return rows.map(toEndpoint);
}

/** Deletes an endpoint: no new deliveries; pending ones are marked failed. False when unknown or already deleted. */
export async function deleteWebhookEndpoint(db: Knex, id: string): Promise<boolean> {
  return db.transaction(async (trx) => {
    const n = await trx('webhook_endpoints').where({ id }).whereNull('deleted_at').update({ deleted_at: trx.fn.now() });
    if (n === 0) return false;
    await trx('webhook_deliveries').where({ endpoint_id: id, status: 'pending' }).update({ status: 'failed', last_error: ENDPOINT_DELETED });
    return true;
  });
}

export interface WebhookDelivery {
  id: string;
  endpointId: string;
  executionId: string;
  eventType: WebhookEvent;
  status: 'pending' | 'delivered' | 'failed';
  attempts: number;
  lastStatusCode: number | null;
  lastError: string | null;
  nextAttemptAt: string | null;
  createdAt: string;
  deliveredAt: string | null;
}

export async function listWebhookDeliveries(db: Knex, executionId: string): Promise<WebhookDelivery[]> {
  const rows = await db('webhook_deliveries')
    .select(
      'id',
      'endpoint_id',
      'execution_id',
      'event_type',
      'status',
      'attempts',
      'last_status_code',
      'last_error',
      'next_attempt_at',
      'created_at',
      'delivered_at',
    )
    .where({ execution_id: executionId })
    .orderBy([{ column: 'created_at' }, { column: 'id' }]);
  return rows.map((r: Record<string, unknown>) => ({
    id: r.id as string,
    endpointId: r.endpoint_id as string,
    executionId: r.execution_id as string,
    eventType: r.event_type as WebhookEvent,
    status: r.status as WebhookDelivery['status'],
    attempts: r.attempts as number,
    lastStatusCode: (r.last_status_code as number | null) ?? null,
    lastError: (r.last_error as string | null) ?? null,
    nextAttemptAt: r.status === 'pending' ? iso(r.next_attempt_at as Date) : null,
    createdAt: iso(r.created_at as Date)!,
    deliveredAt: iso(r.delivered_at as Date | null),
  }));
}

/** The public execution as the statement that caused an event left it (migration 20261126000070). */
export interface ExecutionSnapshot {
  execution: PublicExecutionFields;
  steps: PublicStepFields[];
}

/** A claimed delivery: what the deliverer needs to send one attempt. */
export interface DueDelivery {
  id: string;
  endpointId: string;
  projectId: string;
  executionId: string;
  eventType: WebhookEvent;
  url: string;
  secret: string;
  /** The body of earlier attempts (null on the first: the deliverer builds and keeps it). */
  payload: Record<string, unknown> | null;
  /** What the body describes: the execution when the event happened (null on rows written before the snapshot existed). */
  snapshot: ExecutionSnapshot | null;
  eventAt: string;
  /** Attempts before this one. */
  attempts: number;
}

/**
 * Claims up to `limit` pending deliveries that are due, taking at most `perEndpoint` per
 * endpoint and none of `excludeEndpoints` (the caller's busy ones: one slow or failing
 * endpoint cannot take every slot), with FOR UPDATE SKIP LOCKED
 * so that relays share the work. A claim is a lease: the row's next attempt moves `leaseMs`
 * ahead and its attempt is counted now, so a deliverer that dies mid-send only delays it.
 * "Due" and the lease are read from the database's clock (tes_now()), as retries are written.
 *
 * A picked delivery whose endpoint is deleted is not returned: it is closed in the same
 * statement, failed with "the endpoint was deleted" and no attempt counted. Such rows exist:
 * a delivery written by a transaction that saw the endpoint live, committing after the
 * deletion (whose own statement could not see it to fail it). Index: webhook_deliveries_due_idx.
 */
export async function claimDueDeliveries(
  db: Knex,
  options: { limit: number; perEndpoint: number; leaseMs: number; excludeEndpoints?: readonly string[] },
): Promise<DueDelivery[]> {
  const res = await db.raw<{ rows: Record<string, unknown>[] }>(
    `WITH due AS (
       SELECT d.id, row_number() OVER (PARTITION BY d.endpoint_id ORDER BY d.next_attempt_at) AS n
         FROM webhook_deliveries d
        WHERE d.status = 'pending' AND d.next_attempt_at <= tes_now() AND d.endpoint_id <> ALL(:exclude::text[])
        ORDER BY d.next_attempt_at
        LIMIT :scan
     ), picked AS (
       SELECT d.id, w.deleted_at IS NOT NULL AS endpoint_deleted
         FROM webhook_deliveries d JOIN due ON due.id = d.id JOIN webhook_endpoints w ON w.id = d.endpoint_id
        WHERE due.n <= :perEndpoint AND d.status = 'pending' AND d.next_attempt_at <= tes_now()
        ORDER BY d.next_attempt_at LIMIT :limit
          FOR UPDATE OF d SKIP LOCKED
     ), closed AS (
       UPDATE webhook_deliveries d SET status = 'failed', last_error = :endpointDeleted
         FROM picked WHERE d.id = picked.id AND picked.endpoint_deleted
     )
     UPDATE webhook_deliveries d
        SET next_attempt_at = tes_now() + (:leaseMs * interval '1 millisecond'), attempts = d.attempts + 1
       FROM picked, webhook_endpoints w
      WHERE d.id = picked.id AND NOT picked.endpoint_deleted AND w.id = d.endpoint_id
      RETURNING d.id, d.endpoint_id, d.project_id, d.execution_id, d.event_type, w.url, w.secret, d.payload, d.execution_snapshot,
                d.event_at, d.attempts - 1 AS attempts`,
    {
      scan: options.limit * 10,
      perEndpoint: options.perEndpoint,
      limit: options.limit,
      leaseMs: options.leaseMs,
      exclude: [...(options.excludeEndpoints ?? [])],
      endpointDeleted: ENDPOINT_DELETED,
    },
  );
  return res.rows.map((r) => ({
    id: r.id as string,
    endpointId: r.endpoint_id as string,
    projectId: r.project_id as string,
    executionId: r.execution_id as string,
    eventType: r.event_type as WebhookEvent,
    url: r.url as string,
    secret: r.secret as string,
    payload: (r.payload as Record<string, unknown> | null) ?? null,
    snapshot: (r.execution_snapshot as ExecutionSnapshot | null) ?? null,
    eventAt: iso(r.event_at as Date)!,
    attempts: r.attempts as number,
  }));
}

/**
 * Whether a claimed delivery is still to be sent, asked just before its request: false when it
 * is no longer pending (its endpoint's deletion failed it after the claim) or its endpoint is
 * deleted (then it is closed here as the claim closes one). The endpoint row is read FOR SHARE:
 * a deletion under way is waited for, and its outcome counts. A deletion that commits after
 * this answer cannot stop the request already on its way; every later check sees it.
 */
export async function deliveryStillWanted(db: Knex, id: string): Promise<boolean> {
  const res = await db.raw<{ rows: { wanted: boolean }[] }>(
    `WITH r AS (
       SELECT d.id, d.status = 'pending' AS pending, w.deleted_at IS NOT NULL AS endpoint_deleted
         FROM webhook_deliveries d JOIN webhook_endpoints w ON w.id = d.endpoint_id
        WHERE d.id = :id
          FOR SHARE OF w
     ), closed AS (
       UPDATE webhook_deliveries d SET status = 'failed', last_error = :endpointDeleted
         FROM r WHERE d.id = r.id AND r.pending AND r.endpoint_deleted AND d.status = 'pending'
     )
     SELECT r.pending AND NOT r.endpoint_deleted AS wanted FROM r`,
    { id, endpointDeleted: ENDPOINT_DELETED },
  );
  return res.rows[0]?.wanted ?? false;
}

/** Keeps the body of a delivery's first attempt, so every attempt sends the same event. */
export async function fixDeliveryPayload(db: Knex, id: string, payload: Record<string, unknown>): Promise<void> {
  await db('webhook_deliveries')
    .where({ id })
    .whereNull('payload')
    .update({ payload: JSON.stringify(payload) });
}

/**
 * Records an attempt's outcome: delivered (a 2xx), or failed with the next attempt
 * `retryInMs` from now by the database's clock (tes_now(), which the claim compares with: a
 * relay's clock, ahead or behind, never moves a retry), or failed for good when `retryInMs` is
 * null. Returns when the next attempt is due (null unless one is).
 */
export async function recordDeliveryAttempt(
  db: Knex,
  id: string,
  outcome: { delivered: boolean; statusCode: number | null; error: string | null; retryInMs: number | null },
): Promise<Date | null> {
  const base = { last_status_code: outcome.statusCode, last_error: outcome.error?.slice(0, 500) ?? null };
  const retry = !outcome.delivered && outcome.retryInMs !== null;
  const update = outcome.delivered
    ? { ...base, status: 'delivered', delivered_at: db.fn.now() }
    : retry
      ? { ...base, next_attempt_at: db.raw(`tes_now() + (?::bigint * interval '1 millisecond')`, [Math.round(outcome.retryInMs!)]) }
      : { ...base, status: 'failed' };
  const rows = await db('webhook_deliveries').where({ id, status: 'pending' }).update(update).returning<{ next_attempt_at: Date }[]>(['next_attempt_at']);
  return retry ? (rows[0]?.next_attempt_at ?? null) : null;
}

function toEndpoint(row: Record<string, unknown>): WebhookEndpoint {
  return {
    id: row.id as string,
    projectId: row.project_id as string,
    url: row.url as string,
    events: row.events as WebhookEvent[],
    createdAt: iso(row.created_at as Date)!,
  };
}
