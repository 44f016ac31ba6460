/**
 * Webhooks (issue #13): endpoints per project, and their deliveries. A delivery row is written
 * by a trigger in the statement that makes its execution terminal (migration 20261123000013);
 * the relay's deliverer claims due rows, sends them outside any transaction and records the
 * outcome here.
 */
import { randomBytes } from 'node:crypto';
import type { Knex } from 'knex';
import { newId } from '@tes/core';
import { iso } from './time';

/** The events an endpoint may subscribe to (all of them by default). */
export const WEBHOOK_EVENTS = ['execution.succeeded', 'execution.failed', 'execution.cancelled', 'execution.needs_review'] as const;
export type WebhookEvent = (typeof WEBHOOK_EVENTS)[number];

/** Notified (empty payload) when deliveries were written: a relay looks for due ones at once. */
export const WEBHOOK_DELIVERIES_CHANNEL = 'tes_webhook_deliveries';

/** The channel the triggers notify with an execution id when a visible field of it changed. */
export const EXECUTION_CHANGES_CHANNEL = 'tes_execution_changes';

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
    await trx('webhook_deliveries').where({ endpoint_id: id, status: 'pending' }).update({ status: 'failed', last_error: 'the endpoint was deleted' });
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
 * Index: webhook_deliveries_due_idx.
 */
export async function claimDueDeliveries(
  db: Knex,
  options: { limit: number; perEndpoint: number; leaseMs: number; excludeEndpoints?: readonly string[] },
): Promise<DueDelivery[]> {
  const res = await db.raw<{ rows: Record<string, unknown>[] }>(
    `WITH due AS (
       SELECT d.id, row_number() OVER (PARTITION BY d.endpoint_id ORDER BY d.next_attempt_at) AS n
         FROM webhook_deliveries d
        WHERE d.status = 'pending' AND d.next_attempt_at <= now() AND d.endpoint_id <> ALL(:exclude::text[])
        ORDER BY d.next_attempt_at
        LIMIT :scan
     ), picked AS (
       SELECT d.id FROM webhook_deliveries d JOIN due ON due.id = d.id
        WHERE due.n <= :perEndpoint AND d.status = 'pending' AND d.next_attempt_at <= now()
        ORDER BY d.next_attempt_at LIMIT :limit
          FOR UPDATE OF d SKIP LOCKED
     )
     UPDATE webhook_deliveries d
        SET next_attempt_at = now() + (:leaseMs * interval '1 millisecond'), attempts = d.attempts + 1
       FROM picked, webhook_endpoints w
      WHERE d.id = picked.id AND w.id = d.endpoint_id
      RETURNING d.id, d.endpoint_id, d.project_id, d.execution_id, d.event_type, w.url, w.secret, d.payload, d.event_at, d.attempts - 1 AS attempts`,
    {
      scan: options.limit * 10,
      perEndpoint: options.perEndpoint,
      limit: options.limit,
      leaseMs: options.leaseMs,
      exclude: [...(options.excludeEndpoints ?? [])],
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
    eventAt: iso(r.event_at as Date)!,
    attempts: r.attempts as number,
  }));
}

/** Keeps the body of a delivery's first attempt, so every attempt sends the same event. */
export async function fixDeliveryPayload(db: Knex, id: string, payload: Record<string, unknown>): Promise<void> {
  await db('webhook_deliveries')
    .where({ id })
    .whereNull('payload')
    .update({ payload: JSON.stringify(payload) });
}

/**
 * Records an attempt's outcome: delivered (a 2xx), or failed with the next attempt at
 * `retryAt`, or failed for good when `retryAt` is null.
 */
export async function recordDeliveryAttempt(
  db: Knex,
  id: string,
  outcome: { delivered: boolean; statusCode: number | null; error: string | null; retryAt: Date | null },
): Promise<void> {
  const base = { last_status_code: outcome.statusCode, last_error: outcome.error?.slice(0, 500) ?? null };
  const update = outcome.delivered
    ? { ...base, status: 'delivered', delivered_at: db.fn.now() }
    : outcome.retryAt
      ? { ...base, next_attempt_at: outcome.retryAt }
      : { ...base, status: 'failed' };
  await db('webhook_deliveries').where({ id, status: 'pending' }).update(update);
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
