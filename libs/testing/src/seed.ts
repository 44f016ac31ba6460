import type { Knex } from 'knex';
import { generateKeySecret, newId, SCOPES, type Role, type Scope } from '@tes/core';
import { createApiKey, createOrganization, createProject, creditBalance, publishPrices, submitExecution, type SubmitInput } from '@tes/db';

export interface SeededProject {
  organizationId: string;
  projectId: string;
  keyId: string;
  secret: string;
}

/** An organization, a project with an optional balance and cap, and one API key. */
export async function seedProject(
  db: Knex,
  options: { creditMicros?: number; scopes?: Scope[]; role?: Role; monthlyCapMicros?: number | null; expiresAt?: Date | null } = {},
): Promise<SeededProject> {
  const org = await createOrganization(db, 'Test org');
  const project = await createProject(db, { organizationId: org.id, name: 'Test project', monthlyCapMicros: options.monthlyCapMicros ?? null });
  if (options.creditMicros) await creditBalance(db, { projectId: project.id, micros: options.creditMicros, reference: 'test' });
  const key = await addKey(db, project.id, options);
  return { organizationId: org.id, projectId: project.id, keyId: key.id, secret: key.secret };
}

export async function addKey(
  db: Knex,
  projectId: string,
  options: { scopes?: Scope[]; role?: Role; expiresAt?: Date | null; name?: string } = {},
): Promise<{ id: string; secret: string }> {
  const { lookupId, secret } = generateKeySecret();
  return createApiKey(db, {
    projectId,
    name: options.name ?? 'test key',
    scopes: options.scopes ?? [...SCOPES],
    role: options.role ?? 'ADMIN',
    expiresAt: options.expiresAt ?? null,
    secret,
    lookupId,
  });
}

/**
 * A queued one-step `test.sleep` execution of 1,000 micros, submitted as the gateway submits
 * (reservation, outbox row and journal in one statement), under a price list published for it:
 * for tests of what happens after the submit. Returns its id.
 */
export async function submitTestExecution(
  db: Knex,
  project: Pick<SeededProject, 'projectId' | 'keyId'>,
  overrides: Partial<SubmitInput> = {},
): Promise<string> {
  const id = overrides.id ?? newId('exe');
  const priceVersion = overrides.priceVersion ?? (await publishPrices(db, { 'test.sleep': 1 })).priceVersion;
  const r = await submitExecution(db, {
    id,
    projectId: project.projectId,
    apiKeyId: project.keyId,
    tool: 'test.sleep',
    model: 'sleep',
    category: 'test',
    arguments: {},
    priceVersion,
    totalSteps: 1,
    reservedMicros: 1_000,
    idempotencyKey: id,
    requestDigest: 'd',
    dispatchDeadlineMs: 60_000,
    ...overrides,
  });
  if (r.kind !== 'created') throw new Error(`submitTestExecution: ${id} was not created (${r.kind})`);
  return id;
}
