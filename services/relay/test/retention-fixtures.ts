import type { Knex } from 'knex';
import { newId } from '@tes/core';
import { createWebhookEndpoint, publishPrices, submitExecution, type RetentionHorizons } from '@tes/db';
import { seedProject } from '@tes/testing';

/** The defaults of libs/config (OUTBOX_RETENTION_HOURS=24, WEBHOOK_DELIVERY_RETENTION_DAYS=7, …). */
export const DEFAULT_HORIZONS: RetentionHorizons = {
  outboxMs: 24 * 3_600_000,
  webhookDeliveriesMs: 7 * 86_400_000,
  rateLimitsMs: 3_600_000,
  usageMonths: 13,
};

/** A project with an accepted execution (so deliveries have an execution to name) and a webhook endpoint. */
export async function seedExecutionWithEndpoint(db: Knex): Promise<{ projectId: string; executionId: string; endpointId: string }> {
  const p = await seedProject(db, { creditMicros: 1_000_000 });
  const { priceVersion } = await publishPrices(db, { retention: 1 });
  const executionId = await submit(db, p, priceVersion);
  const endpoint = await createWebhookEndpoint(db, { projectId: p.projectId, url: 'https://hooks.example.com/tes' });
  return { projectId: p.projectId, executionId, endpointId: endpoint.id };
}

/** Submits one execution (an outbox row, a reservation) through the gateway's repository. */
export async function submit(db: Knex, p: { projectId: string; keyId: string }, priceVersion: string): Promise<string> {
  const id = newId('exe');
  await submitExecution(db, {
    id,
    projectId: p.projectId,
    apiKeyId: p.keyId,
    tool: 'test.sleep',
    model: 'default',
    category: 'test',
    arguments: {},
    priceVersion,
    totalSteps: 1,
    reservedMicros: 1,
    idempotencyKey: `retention-${id}`,
    requestDigest: 'd',
    dispatchDeadlineMs: 60_000,
  });
  return id;
}

/**
 * Inserts `n` webhook deliveries of one execution and endpoint, as the terminal-state trigger
 * writes them, with the given status and age (seconds).
 */
export async function insertDeliveries(
  db: Knex,
  at: { projectId: string; executionId: string; endpointId: string },
  n: number,
  status: 'pending' | 'delivered' | 'failed',
  ageSeconds: number,
): Promise<string[]> {
  const res = await db.raw<{ rows: { id: string }[] }>(
    `INSERT INTO webhook_deliveries (id, endpoint_id, project_id, execution_id, event_type, status, created_at, delivered_at)
     SELECT 'msg_' || replace(gen_random_uuid()::text, '-', ''), :endpointId, :projectId, :executionId, 'execution.succeeded', :status,
            now() - :age * interval '1 second', CASE WHEN :status = 'delivered' THEN now() END
       FROM generate_series(1, :n)
     RETURNING id`,
    { ...at, status, age: ageSeconds, n },
  );
  return res.rows.map((r) => r.id);
}

/** Inserts `n` outbox rows for one execution, published `publishedAgeSeconds` ago (null: unsent). */
export async function insertOutbox(db: Knex, at: { projectId: string; executionId: string }, n: number, publishedAgeSeconds: number | null): Promise<number[]> {
  const res = await db.raw<{ rows: { id: number }[] }>(
    `INSERT INTO outbox (project_id, execution_id, routing_key, payload, created_at, published_at)
     SELECT :projectId, :executionId, 'test', jsonb_build_object('executionId', :executionId::text, 'projectId', :projectId::text),
            now() - coalesce(:age, 0) * interval '1 second', now() - :age * interval '1 second'
       FROM generate_series(1, :n)
     RETURNING id`,
    { ...at, n, age: publishedAgeSeconds },
  );
  return res.rows.map((r) => r.id);
}
