import { generateKeySecret, SCOPES } from '@tes/core';
import { createApiKey, createOrganization, createProject, creditBalance, type Db } from '@tes/db';

export interface Tenant {
  projectId: string;
  secret: string;
  /** An execution of this project (B1 reads it). */
  executionId?: string;
}

/** Enough for every submit of a full run many times over (test.sleep here costs 1 micro). */
const CREDIT_MICROS = 1_000_000_000_000;
/** test.sleep, no sleep, one step, one micro: money moves but the pipeline does no media work. */
const SLEEP_ARGUMENTS = { seconds: 0, steps: 1, costMicrosPerStep: 1 };

async function newProject(db: Db, name: string): Promise<string> {
  const org = await createOrganization(db, `bench ${name}`);
  const project = await createProject(db, { organizationId: org.id, name });
  await creditBalance(db, { projectId: project.id, micros: CREDIT_MICROS, reference: 'bench' });
  return project.id;
}

async function newKey(db: Db, projectId: string, name: string): Promise<string> {
  const { lookupId, secret } = generateKeySecret();
  await createApiKey(db, { projectId, name, scopes: [...SCOPES], role: 'ADMIN', secret, lookupId });
  return secret;
}

/** Many projects, one funded key each, through the admin functions (as `admin` does). */
export async function seedSpread(db: Db, projects: number): Promise<Tenant[]> {
  const out: Tenant[] = [];
  for (let i = 0; i < projects; i += 10) {
    const batch = Array.from({ length: Math.min(10, projects - i) }, async (_, j) => {
      const projectId = await newProject(db, `spread ${i + j}`);
      return { projectId, secret: await newKey(db, projectId, 'bench') };
    });
    out.push(...(await Promise.all(batch)));
  }
  return out;
}

/** One project with many keys: B4 puts every submit on its balance row, not on one key's limiter row. */
export async function seedHot(db: Db, keys: number): Promise<Tenant[]> {
  const projectId = await newProject(db, 'hot');
  const out: Tenant[] = [];
  for (let i = 0; i < keys; i++) out.push({ projectId, secret: await newKey(db, projectId, `hot ${i}`) });
  return out;
}

async function api(baseUrl: string, secret: string, method: string, path: string, body?: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(`${baseUrl}${path}`, {
    method,
    headers: { authorization: `Bearer ${secret}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? (JSON.parse(text) as { data?: Record<string, unknown>; error?: unknown }) : {} };
}

/** The submit body a client would send after a quote (priceVersion + maximum from the quote); test.sleep 0 s by default. */
export async function submitBody(
  baseUrl: string,
  secret: string,
  tool = 'test.sleep',
  args: Record<string, unknown> = SLEEP_ARGUMENTS,
): Promise<Record<string, unknown>> {
  const q = await api(baseUrl, secret, 'POST', '/tools/quote', { tool, arguments: args });
  if (q.status !== 200 || !q.body.data) throw new Error(`quote failed: ${q.status} ${JSON.stringify(q.body)}`);
  return {
    tool,
    arguments: args,
    priceVersion: q.body.data.priceVersion,
    maximumChargeMicros: q.body.data.maximumChargeMicros,
  };
}

/** One submitted execution per tenant, ten at a time; fills tenant.executionId. */
export async function submitOneEach(baseUrl: string, tenants: Tenant[], body: Record<string, unknown>): Promise<void> {
  for (let i = 0; i < tenants.length; i += 10) {
    await Promise.all(
      tenants.slice(i, i + 10).map(async (t, j) => {
        const r = await api(baseUrl, t.secret, 'POST', '/tools/test.sleep', body, { 'idempotency-key': `bench-seed-${i + j}` });
        if (r.status !== 202) throw new Error(`seed submit: ${r.status} ${JSON.stringify(r.body)}`);
        t.executionId = r.body.data?.id as string;
      }),
    );
  }
}

/** `n` submitted executions, keys rotating over the tenants, 20 at a time; each with the key that may read it. */
export async function submitMany(
  baseUrl: string,
  tenants: Tenant[],
  body: Record<string, unknown>,
  n: number,
  keyPrefix: string,
): Promise<{ secret: string; executionId: string }[]> {
  const out: { secret: string; executionId: string }[] = [];
  for (let i = 0; i < n; i += 20) {
    const batch = Array.from({ length: Math.min(20, n - i) }, async (_, j) => {
      const secret = tenants[(i + j) % tenants.length]!.secret;
      const r = await api(baseUrl, secret, 'POST', '/tools/test.sleep', body, { 'idempotency-key': `${keyPrefix}-${i + j}` });
      if (r.status !== 202) throw new Error(`submit: ${r.status} ${JSON.stringify(r.body)}`);
      return { secret, executionId: r.body.data?.id as string };
    });
    out.push(...(await Promise.all(batch)));
  }
  return out;
}
