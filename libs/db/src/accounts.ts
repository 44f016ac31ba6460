import type { Knex } from 'knex';
import { AppError, digestSecret, newId, type Role, type Scope } from '@tes/core';
import { postJournal } from './ledger';
import { iso } from './time';
import { isUniqueViolation } from './pg-errors';

export interface ProjectRecord {
  id: string;
  organizationId: string;
  organizationName: string;
  name: string;
  availableMicros: number;
  reservedMicros: number;
  monthlyCapMicros: number | null;
  monthChargedMicros: number;
}

export interface ApiKeyRecord {
  id: string;
  projectId: string;
  organizationId: string;
  name: string;
  digest: Buffer;
  scopes: Scope[];
  role: Role;
  expiresAt: string | null;
  /**
   * When it expires on the clock of the process that read it: the time the database's clock
   * (tes_now()) says is left, added to that process's clock as the row was read. Compare this
   * with Date.now(), never expiresAt: a process's clock may be off the database's.
   */
  expiresAtMs: number | null;
  revokedAt: string | null;
}

export async function createOrganization(db: Knex, name: string): Promise<{ id: string }> {
  const id = newId('org');
  await db('organizations').insert({ id, name });
  return { id };
}

export async function createProject(db: Knex, input: { organizationId: string; name: string; monthlyCapMicros?: number | null }): Promise<{ id: string }> {
  const org = await db('organizations').select('id').where({ id: input.organizationId }).first<{ id: string } | undefined>();
  if (!org) throw new AppError('invalid_request', `organization ${input.organizationId} not found`);
  const id = newId('prj');
  await db('projects').insert({
    id,
    organization_id: input.organizationId,
    name: input.name,
    monthly_cap_micros: input.monthlyCapMicros ?? null,
  });
  return { id };
}

interface ProjectRow {
  id: string;
  organization_id: string;
  organization_name: string;
  name: string;
  available_micros: number;
  reserved_micros: number;
  monthly_cap_micros: number | null;
  month_charged_micros: number;
}

export async function getProject(db: Knex, projectId: string): Promise<ProjectRecord | null> {
  const row = await db('projects as p')
    .join('organizations as o', 'o.id', 'p.organization_id')
    .select(
      'p.id',
      'p.organization_id',
      'o.name as organization_name',
      'p.name',
      'p.available_micros',
      'p.reserved_micros',
      'p.monthly_cap_micros',
      db.raw('CASE WHEN p.cap_month >= tes_month() THEN p.month_charged_micros ELSE 0 END AS month_charged_micros'),
    )
    .where('p.id', projectId)
    .first<ProjectRow | undefined>();
  if (!row) return null;
  return {
    id: row.id,
    organizationId: row.organization_id,
    organizationName: row.organization_name,
    name: row.name,
    availableMicros: row.available_micros,
    reservedMicros: row.reserved_micros,
    monthlyCapMicros: row.monthly_cap_micros,
    monthChargedMicros: row.month_charged_micros,
  };
}

export interface CreatedKey {
  id: string;
  secret: string;
}

export async function createApiKey(
  db: Knex,
  input: { projectId: string; name: string; scopes: Scope[]; role: Role; expiresAt?: Date | null; secret: string; lookupId: string },
): Promise<CreatedKey> {
  const project = await db('projects').select('id').where({ id: input.projectId }).first<{ id: string } | undefined>();
  if (!project) throw new AppError('invalid_request', `project ${input.projectId} not found`);
  const id = newId('key');
  await db('api_keys').insert({
    id,
    project_id: input.projectId,
    name: input.name,
    lookup_id: input.lookupId,
    digest: digestSecret(input.secret),
    scopes: input.scopes,
    role: input.role,
    expires_at: input.expiresAt ?? null,
  });
  // gateways that cached "no key has this lookup id" forget it now
  await db.raw('SELECT pg_notify(:channel, :lookupId)', { channel: KEY_CHANGES_CHANNEL, lookupId: input.lookupId });
  return { id, secret: input.secret };
}

interface ApiKeyRow {
  id: string;
  project_id: string;
  organization_id: string;
  name: string;
  digest: Buffer;
  scopes: Scope[];
  role: Role;
  expires_at: Date | null;
  expires_in_ms: number | null;
  revoked_at: Date | null;
}

export async function findApiKeyByLookupId(db: Knex, lookupId: string): Promise<ApiKeyRecord | null> {
  const row = await db('api_keys as k')
    .join('projects as p', 'p.id', 'k.project_id')
    .select('k.id', 'k.project_id', 'p.organization_id', 'k.name', 'k.digest', 'k.scopes', 'k.role', 'k.expires_at', 'k.revoked_at')
    .select(db.raw('(extract(epoch FROM k.expires_at - tes_now()) * 1000)::float8 AS expires_in_ms'))
    .where('k.lookup_id', lookupId)
    .first<ApiKeyRow | undefined>();
  const readAt = Date.now();
  if (!row) return null;
  return {
    id: row.id,
    projectId: row.project_id,
    organizationId: row.organization_id,
    name: row.name,
    digest: row.digest,
    scopes: row.scopes,
    role: row.role,
    expiresAt: iso(row.expires_at),
    expiresAtMs: row.expires_in_ms === null ? null : readAt + row.expires_in_ms,
    revokedAt: iso(row.revoked_at),
  };
}

/** The channel on which key changes are announced (NOTIFY payload: the key's lookup id). */
export const KEY_CHANGES_CHANNEL = 'tes_api_keys';

/**
 * Revokes a key and announces it in the same statement: pg_notify is delivered when the
 * revocation commits, so every gateway listening (KeyChangeListener) drops its cached row then,
 * and the next request with the key is refused, not one up to AUTH_CACHE_TTL_MS later.
 */
export async function revokeApiKey(db: Knex, keyId: string): Promise<{ id: string; revokedAt: string } | null> {
  const res = await db.raw<{ rows: { id: string; revoked_at: Date }[] }>(
    `WITH k AS (
       UPDATE api_keys SET revoked_at = coalesce(revoked_at, now()) WHERE id = :keyId RETURNING id, revoked_at, lookup_id
     )
     SELECT k.id, k.revoked_at, pg_notify(:channel, k.lookup_id) FROM k`,
    { keyId, channel: KEY_CHANGES_CHANNEL },
  );
  const row = res.rows[0];
  return row ? { id: row.id, revokedAt: iso(row.revoked_at)! } : null;
}

/** Adds prepaid funds: one journal entry funding -> available. */
export async function creditBalance(
  db: Knex,
  input: { projectId: string; micros: number; reference?: string | null },
): Promise<{ availableMicros: number; replayed?: true }> {
  if (!Number.isSafeInteger(input.micros) || input.micros <= 0) throw new Error('credit must be a positive whole number of micros');
  try {
    return await creditOnce(db, input);
  } catch (err) {
    // A concurrent twin with the same reference committed first (the unique index
    // ledger_credit_reference_idx): this one changed nothing; answer as its replay.
    if (!isUniqueViolation(err) || !input.reference) throw err;
    return creditOnce(db, input);
  }
}

/**
 * A credit and its journal entries in one transaction. A reference names a credit once per
 * project (an invoice, a payment id): a retried credit with the same reference and amount is
 * a no-op that answers the balance; the same reference with another amount is refused.
 */
async function creditOnce(
  db: Knex,
  input: { projectId: string; micros: number; reference?: string | null },
): Promise<{ availableMicros: number; replayed?: true }> {
  return db.transaction(async (trx) => {
    if (input.reference) {
      const prior = await trx('ledger_entries')
        .select('amount_micros')
        .where({ project_id: input.projectId, kind: 'credit', account: 'available', reference: input.reference })
        .first<{ amount_micros: number } | undefined>();
      if (prior) {
        if (prior.amount_micros !== input.micros) {
          throw new AppError('invalid_request', `reference ${input.reference} was already used for a credit of ${prior.amount_micros} micros`);
        }
        const p = await trx('projects').select('available_micros').where({ id: input.projectId }).first<{ available_micros: number }>();
        return { availableMicros: p.available_micros, replayed: true as const };
      }
    }
    const rows = await trx('projects')
      .where({ id: input.projectId })
      .increment('available_micros', input.micros)
      .returning<{ available_micros: number }[]>(['available_micros']);
    const row = rows[0];
    if (!row) throw new AppError('invalid_request', `project ${input.projectId} not found`);
    await postJournal(trx, {
      projectId: input.projectId,
      kind: 'credit',
      reference: input.reference ?? null,
      postings: [
        { account: 'funding', amountMicros: -input.micros },
        { account: 'available', amountMicros: input.micros },
      ],
    });
    return { availableMicros: row.available_micros };
  });
}

export async function setMonthlyCap(db: Knex, projectId: string, micros: number | null): Promise<{ monthlyCapMicros: number | null }> {
  const rows = await db('projects')
    .where({ id: projectId })
    .update({ monthly_cap_micros: micros })
    .returning<{ monthly_cap_micros: number | null }[]>(['monthly_cap_micros']);
  if (!rows[0]) throw new AppError('invalid_request', `project ${projectId} not found`);
  return { monthlyCapMicros: rows[0].monthly_cap_micros };
}
