/**
 * Webhooks (issue #13): endpoints per project, and their deliveries. A delivery row is written
 * by a trigger in the statement that makes its execution terminal (migration 20261123000013);
 * the relay's deliverer claims due rows, sends them outside any transaction and records the
 * outcome here.
 */
import { randomBytes } from 'node:crypto';
import type { Knex } from 'knex';
import { newId, WEBHOOK_EVENTS, type WebhookEvent, type WebhookEventBody } from '@tes/core';
import type { PublicExecutionFields, PublicStepFields } from './executions';
import { iso } from './time';

/** The event types and the body (libs/core webhook-event.ts, their owner), for the callers of this module. */
export { WEBHOOK_EVENTS, type WebhookEvent } from '@tes/core';

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

const ENDPOINT_COLUMNS = ['id', 'project_id', 'url', 'events', 'created_at'];

/** A new signing secret (Standard Webhooks: "whsec_" + base64 of 24 random bytes). */
function newSecret(): string {
  return `whsec_${randomBytes(24).toString('base64')}`;
}

/** Registers an endpoint; the secret is returned here only. */
export async function createWebhookEndpoint(
  db: Knex,
  input: { projectId: string; url: string; events?: readonly WebhookEvent[] },
): Promise<WebhookEndpoint & { secret: string }> {
  const secret = newSecret();
  const [row] = await db('webhook_endpoints')
    .insert({ id: newId('whk'), project_id: input.projectId, url: input.url, secret, events: [...(input.events ?? WEBHOOK_EVENTS)] })
    .returning<Record<string, unknown>[]>(ENDPOINT_COLUMNS);
  return { ...toEndpoint(row!), secret };
}

export async function listWebhookEndpoints(db: Knex, projectId: string): Promise<WebhookEndpoint[]> {
  const rows = await db('webhook_endpoints').select(ENDPOINT_COLUMNS).where({ project_id: projectId }).whereNull('deleted_at').orderBy('id');
  return rows.map(toEndpoint);
}

/**
 * A live endpoint of `projectId`, with its secret (to sign a test event), or null: another
 * project's endpoint is as unknown as a deleted or never-created one.
 */
export async function getWebhookEndpoint(db: Knex, projectId: string, id: string): Promise<(WebhookEndpoint & { secret: string }) | null> {
  const row = await db('webhook_endpoints')
    .select([...ENDPOINT_COLUMNS, 'secret'])
    .where({ id, project_id: projectId })
    .whereNull('deleted_at')
    .first<Record<string, unknown> | undefined>();
  return row ? { ...toEndpoint(row), secret: row.secret as string } : null;
}

/**
 * Gives a live endpoint of `projectId` a new secret, returned here only; null when there is
 * none. The old secret stops at once: every attempt from now on, retries of earlier events
 * included, is signed with the new one (the deliverer reads the secret when it claims).
 */
export async function rotateWebhookSecret(db: Knex, projectId: string, id: string): Promise<(WebhookEndpoint & { secret: string }) | null> {
  const secret = newSecret();
  const [row] = await db('webhook_endpoints')
    .where({ id, project_id: projectId })
    .whereNull('deleted_at')
    .update({ secret })
    .returning<Record<string, unknown>[]>(ENDPOINT_COLUMNS);
  return row ? { ...toEndpoint(row), secret } : null;
}

/**
 * Deletes an endpoint: no new deliveries; pending ones are marked failed. False when unknown,
 * already deleted, or (with `projectId`, as the API asks) another project's.
 */
export async function deleteWebhookEndpoint(db: Knex, id: string, projectId?: string): Promise<boolean> {
  return db.transaction(async (trx) => {
    const n = await trx('webhook_endpoints')
      .where({ id, ...(projectId === undefined ? {} : { project_id: projectId }) })
      .whereNull('deleted_at')
      .update({ deleted_at: trx.fn.now() });
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

const DELIVERY_COLUMNS = [
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
];

export async function listWebhookDeliveries(db: Knex, executionId: string): Promise<WebhookDelivery[]> {
  const rows = await db('webhook_deliveries')
    .select(DELIVERY_COLUMNS)
    .where({ execution_id: executionId })
    .orderBy([{ column: 'created_at' }, { column: 'id' }]);
  return rows.map(toDelivery);
}

/**
 * An endpoint's most recent deliveries, newest first, at most `limit`; only `projectId`'s
 * (another project's endpoint id finds nothing). The rows are kept as long as retention keeps
 * them (WEBHOOK_DELIVERY_RETENTION_DAYS). Reads webhook_deliveries by endpoint_id: an
 * endpoint's deliveries are few beside the table, and the (project_id, ...) index narrows them.
 */
export async function listEndpointDeliveries(db: Knex, projectId: string, endpointId: string, limit: number): Promise<WebhookDelivery[]> {
  const rows = await db('webhook_deliveries')
    .select(DELIVERY_COLUMNS)
    .where({ endpoint_id: endpointId, project_id: projectId })
    .orderBy([
      { column: 'created_at', order: 'desc' },
      { column: 'id', order: 'desc' },
    ])
    .limit(limit);
  return rows.map(toDelivery);
}

function toDelivery(r: Record<string, unknown>): WebhookDelivery {
  return {
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
  };
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
  organizationId: string;
  executionId: string;
  eventType: WebhookEvent;
  url: string;
  secret: string;
  /** The body of earlier attempts (null on the first: the deliverer builds and keeps it). */
  payload: WebhookEventBody | null;
  /** What the body describes: the execution when the event happened (null on rows written before the snapshot existed). */
  snapshot: ExecutionSnapshot | null;
  eventAt: string;
  /** Attempts before this one. */
  attempts: number;
  /**
   * This attempt's number (attempts + 1): the claim's fence. A later claim of the row counts
   * another attempt, so a write carrying this number after that changes nothing.
   */
  attempt: number;
}

export interface ClaimOptions {
  limit: number;
  /** Attempts one project may have in flight in this deliverer, those of `inFlight` included. */
  perProject: number;
  /** The same for all the projects of one organization. */
  perOrganization: number;
  leaseMs: number;
  /** The deliverer's attempts in flight, by project and by organization (absent: none). */
  inFlight?: { projects: ReadonlyMap<string, number>; organizations: ReadonlyMap<string, number> };
}

/**
 * Claims up to `limit` pending deliveries that are due, shared fairly by project: the next slot
 * goes to the oldest due delivery of the project with the fewest attempts in flight (those the
 * caller has in flight plus those taken earlier in this claim), ties to the oldest, and no
 * project passes `perProject` nor organization `perOrganization`. So slow or failing endpoints
 * hold at most their project's (and organization's) share of the slots, never every slot.
 * FOR UPDATE SKIP LOCKED lets relays share the work; each shares its own slots this way.
 *
 * A claim is a lease: the row's next attempt moves `leaseMs` ahead and its attempt is counted
 * now, so a deliverer that dies mid-send only delays it; the count is also the fence of the
 * attempt's later writes (DueDelivery.attempt). "Due" and the lease are read from the
 * database's clock (tes_now()), as retries are written.
 *
 * Cost: while nothing is due, one probe of webhook_deliveries_due_idx (the idle poll: its
 * earliest entry, 4 buffers, 0.1 ms with the rows below all waiting for a retry). Else
 * the projects with pending deliveries (due or waiting for a retry) are walked by a loose
 * index scan, one probe of webhook_deliveries_project_due_idx each (about 5 µs: this part grows
 * with those projects), and each gives at most `perProject` of its oldest due rows (a range of
 * the same index): bounded by the deliveries not yet ended, and a project's backlog of due
 * rows, however long, is read no further than its share. Only the first `limit` × 4 in the
 * fair order are joined and locked. Measured (EXPLAIN ANALYZE, 300 projects with due rows, two
 * of them with 50,000 pending each, beside 200,000 ended rows): 301 index-only probes, 4 rows
 * read per project, 3.6 k buffers, 5 ms (15 ms on a 2-core machine at load 17).
 *
 * A picked delivery whose endpoint is deleted is not returned: it is closed in the same
 * statement, failed with "the endpoint was deleted" and no attempt counted. Such rows exist:
 * a delivery written by a transaction that saw the endpoint live, committing after the
 * deletion (whose own statement could not see it to fail it).
 */
export async function claimDueDeliveries(db: Knex, options: ClaimOptions): Promise<DueDelivery[]> {
  const projects = [...(options.inFlight?.projects ?? new Map<string, number>())];
  const organizations = [...(options.inFlight?.organizations ?? new Map<string, number>())];
  const res = await db.raw<{ rows: Record<string, unknown>[] }>(
    `WITH RECURSIVE waiting(project_id) AS (
       -- no walk at all while nothing is due (the idle poll): min() reads webhook_deliveries_due_idx's first entry
       (SELECT project_id FROM webhook_deliveries
         WHERE status = 'pending' AND (SELECT min(next_attempt_at) FROM webhook_deliveries WHERE status = 'pending') <= tes_now()
         ORDER BY project_id LIMIT 1)
       UNION ALL
       SELECT (SELECT d.project_id FROM webhook_deliveries d
                WHERE d.status = 'pending' AND d.project_id > waiting.project_id ORDER BY d.project_id LIMIT 1)
         FROM waiting WHERE waiting.project_id IS NOT NULL
     ), due AS (
       SELECT c.id, c.next_attempt_at, p.organization_id,
              coalesce(busy.n, 0) + row_number() OVER (PARTITION BY c.project_id ORDER BY c.next_attempt_at, c.id) AS project_load
         FROM waiting
        CROSS JOIN LATERAL (
          SELECT d.id, d.project_id, d.next_attempt_at FROM webhook_deliveries d
           WHERE d.status = 'pending' AND d.project_id = waiting.project_id AND d.next_attempt_at <= tes_now()
           ORDER BY d.next_attempt_at LIMIT :perProject
        ) c
         JOIN projects p ON p.id = c.project_id
         LEFT JOIN unnest(:projects::text[], :projectCounts::int[]) AS busy(project_id, n) ON busy.project_id = c.project_id
     ), shared AS (
       SELECT due.id, due.next_attempt_at, due.organization_id, due.project_load,
              coalesce(busy.n, 0) + row_number() OVER (PARTITION BY due.organization_id ORDER BY due.project_load, due.next_attempt_at, due.id)
                AS organization_load
         FROM due
         LEFT JOIN unnest(:organizations::text[], :organizationCounts::int[]) AS busy(organization_id, n)
                ON busy.organization_id = due.organization_id
        WHERE due.project_load <= :perProject
     ), ranked AS (
       SELECT * FROM shared WHERE shared.organization_load <= :perOrganization
        ORDER BY shared.project_load, shared.next_attempt_at, shared.id LIMIT :scan
     ), picked AS (
       SELECT d.id, ranked.organization_id, w.deleted_at IS NOT NULL AS endpoint_deleted
         FROM webhook_deliveries d JOIN ranked ON ranked.id = d.id JOIN webhook_endpoints w ON w.id = d.endpoint_id
        WHERE d.status = 'pending' AND d.next_attempt_at <= tes_now()
        ORDER BY ranked.project_load, ranked.next_attempt_at, ranked.id LIMIT :limit
          FOR UPDATE OF d SKIP LOCKED
     ), closed AS (
       UPDATE webhook_deliveries d SET status = 'failed', last_error = :endpointDeleted
         FROM picked WHERE d.id = picked.id AND picked.endpoint_deleted
     )
     UPDATE webhook_deliveries d
        SET next_attempt_at = tes_now() + (:leaseMs * interval '1 millisecond'), attempts = d.attempts + 1
       FROM picked, webhook_endpoints w
      WHERE d.id = picked.id AND NOT picked.endpoint_deleted AND w.id = d.endpoint_id
      RETURNING d.id, d.endpoint_id, d.project_id, picked.organization_id, d.execution_id, d.event_type, w.url, w.secret, d.payload,
                d.execution_snapshot, d.event_at, d.attempts`,
    {
      perProject: options.perProject,
      perOrganization: options.perOrganization,
      limit: options.limit,
      // spares for the rows other relays hold locked (SKIP LOCKED passes them)
      scan: options.limit * 4,
      leaseMs: options.leaseMs,
      projects: projects.map(([id]) => id),
      projectCounts: projects.map(([, n]) => n),
      organizations: organizations.map(([id]) => id),
      organizationCounts: organizations.map(([, n]) => n),
      endpointDeleted: ENDPOINT_DELETED,
    },
  );
  return res.rows.map((r) => ({
    id: r.id as string,
    endpointId: r.endpoint_id as string,
    projectId: r.project_id as string,
    organizationId: r.organization_id as string,
    executionId: r.execution_id as string,
    eventType: r.event_type as WebhookEvent,
    url: r.url as string,
    secret: r.secret as string,
    payload: (r.payload as WebhookEventBody | null) ?? null,
    snapshot: (r.execution_snapshot as ExecutionSnapshot | null) ?? null,
    eventAt: iso(r.event_at as Date)!,
    attempts: (r.attempts as number) - 1,
    attempt: r.attempts as number,
  }));
}

/** Why a claimed delivery is sent or not (deliveryStillWanted). */
export type SendDecision = 'send' | 'endpoint_deleted' | 'claim_lost';

/**
 * Whether a claimed delivery is still to be sent, asked just before its request:
 * - 'endpoint_deleted' when its endpoint is deleted (then, if still this claim's, it is closed
 *   here as the claim closes one). The endpoint row is read FOR SHARE: a deletion under way is
 *   waited for, and its outcome counts. A deletion that commits after this answer cannot stop
 *   the request already on its way; every later check sees it;
 * - 'claim_lost' when it is no longer pending or its attempts moved past `attempt` (its lease
 *   ran out and another claim took it);
 * - 'send' otherwise, and then the lease is renewed to `leaseMs` from now, fenced by `attempt`:
 *   the send starts with a whole lease ahead of it, however long the work since the claim took,
 *   so the request (bounded by its own deadline, shorter than the lease) ends before any other
 *   claim can take the row.
 */
export async function deliveryStillWanted(db: Knex, id: string, claim: { attempt: number; leaseMs: number }): Promise<SendDecision> {
  const res = await db.raw<{ rows: { ours: boolean; endpoint_deleted: boolean; renewed: boolean }[] }>(
    `WITH r AS (
       SELECT d.id, d.status = 'pending' AND d.attempts = :attempt AS ours, w.deleted_at IS NOT NULL AS endpoint_deleted
         FROM webhook_deliveries d JOIN webhook_endpoints w ON w.id = d.endpoint_id
        WHERE d.id = :id
          FOR SHARE OF w
     ), closed AS (
       UPDATE webhook_deliveries d SET status = 'failed', last_error = :endpointDeleted
         FROM r WHERE d.id = r.id AND r.ours AND r.endpoint_deleted AND d.status = 'pending' AND d.attempts = :attempt
     ), renewed AS (
       UPDATE webhook_deliveries d SET next_attempt_at = tes_now() + (:leaseMs * interval '1 millisecond')
         FROM r WHERE d.id = r.id AND r.ours AND NOT r.endpoint_deleted AND d.status = 'pending' AND d.attempts = :attempt
       RETURNING d.id
     )
     SELECT r.ours, r.endpoint_deleted, EXISTS (SELECT 1 FROM renewed) AS renewed FROM r`,
    { id, attempt: claim.attempt, leaseMs: claim.leaseMs, endpointDeleted: ENDPOINT_DELETED },
  );
  const row = res.rows[0];
  if (row?.endpoint_deleted) return 'endpoint_deleted';
  return row?.ours && row.renewed ? 'send' : 'claim_lost';
}

/** Keeps the body of a delivery's first attempt, so every attempt sends the same event. */
export async function fixDeliveryPayload(db: Knex, id: string, payload: WebhookEventBody): Promise<void> {
  await db('webhook_deliveries')
    .where({ id })
    .whereNull('payload')
    .update({ payload: JSON.stringify(payload) });
}

/**
 * Records an attempt's outcome: delivered (a 2xx), or failed with the next attempt
 * `retryInMs` from now by the database's clock (tes_now(), which the claim compares with: a
 * relay's clock, ahead or behind, never moves a retry), or failed for good when `retryInMs` is
 * null. Fenced by the claim: only while the row is still pending at `attempt` attempts (its
 * claim's count). A write from an attempt whose row was claimed again since changes nothing,
 * so it can neither end the newer attempt's delivery nor spend its retry schedule. Returns
 * whether it was recorded, and when the next attempt is due (null unless one is).
 */
export async function recordDeliveryAttempt(
  db: Knex,
  id: string,
  outcome: { attempt: number; delivered: boolean; statusCode: number | null; error: string | null; retryInMs: number | null },
): Promise<{ recorded: boolean; retryAt: Date | null }> {
  const base = { last_status_code: outcome.statusCode, last_error: outcome.error?.slice(0, 500) ?? null };
  const retry = !outcome.delivered && outcome.retryInMs !== null;
  const update = outcome.delivered
    ? { ...base, status: 'delivered', delivered_at: db.fn.now() }
    : retry
      ? { ...base, next_attempt_at: db.raw(`tes_now() + (?::bigint * interval '1 millisecond')`, [Math.round(outcome.retryInMs!)]) }
      : { ...base, status: 'failed' };
  const rows = await db('webhook_deliveries')
    .where({ id, status: 'pending', attempts: outcome.attempt })
    .update(update)
    .returning<{ next_attempt_at: Date }[]>(['next_attempt_at']);
  return { recorded: rows.length > 0, retryAt: retry ? (rows[0]?.next_attempt_at ?? null) : null };
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
