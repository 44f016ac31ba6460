/**
 * The operator's reads: every statement the read commands run, each with the index that makes
 * it cheap named beside it. Reads only; nothing here takes a lock that a submit or a settlement
 * waits for.
 */
import type { Knex } from 'knex';
import type { ExecutionStatus } from '@tes/core';
import { iso, type ProjectRecord } from '@tes/db';

export interface OrganizationSummary {
  id: string;
  name: string;
  projects: number;
  createdAt: string;
}

export async function listOrganizations(db: Knex): Promise<OrganizationSummary[]> {
  // projects_organization_idx answers each count
  const rows = await db.raw<{ rows: { id: string; name: string; projects: number; created_at: Date }[] }>(
    `SELECT o.id, o.name, o.created_at, (SELECT count(*) FROM projects p WHERE p.organization_id = o.id) AS projects
       FROM organizations o ORDER BY o.id`,
  );
  return rows.rows.map((r) => ({ id: r.id, name: r.name, projects: r.projects, createdAt: iso(r.created_at)! }));
}

/** A project as the gateway reads it (monthChargedMicros: this UTC month's charges, what the cap is checked against), and when it was made. */
export interface ProjectSummary extends ProjectRecord {
  createdAt: string;
}

interface ProjectSummaryRow {
  id: string;
  organization_id: string;
  organization_name: string;
  name: string;
  available_micros: number;
  reserved_micros: number;
  monthly_cap_micros: number | null;
  month_charged_micros: number;
  created_at: Date;
}

// The month counter is the current month's only while cap_month is (the settlement's rule).
const PROJECT_COLUMNS = `p.id, p.organization_id, o.name AS organization_name, p.name, p.available_micros, p.reserved_micros,
  p.monthly_cap_micros, CASE WHEN p.cap_month >= tes_month() THEN p.month_charged_micros ELSE 0 END AS month_charged_micros, p.created_at`;

function toProject(r: ProjectSummaryRow): ProjectSummary {
  return {
    id: r.id,
    organizationId: r.organization_id,
    organizationName: r.organization_name,
    name: r.name,
    availableMicros: r.available_micros,
    reservedMicros: r.reserved_micros,
    monthlyCapMicros: r.monthly_cap_micros,
    monthChargedMicros: r.month_charged_micros,
    createdAt: iso(r.created_at)!,
  };
}

export async function listProjects(db: Knex, organizationId?: string): Promise<ProjectSummary[]> {
  const where = organizationId === undefined ? '' : 'WHERE p.organization_id = :organizationId';
  const res = await db.raw<{ rows: ProjectSummaryRow[] }>(
    `SELECT ${PROJECT_COLUMNS} FROM projects p JOIN organizations o ON o.id = p.organization_id ${where} ORDER BY p.id`,
    organizationId === undefined ? {} : { organizationId },
  );
  return res.rows.map(toProject);
}

export async function organizationExists(db: Knex, id: string): Promise<boolean> {
  return (await db('organizations').where({ id }).first('id')) !== undefined;
}

export async function findProject(db: Knex, id: string): Promise<ProjectSummary | null> {
  const res = await db.raw<{ rows: ProjectSummaryRow[] }>(
    `SELECT ${PROJECT_COLUMNS} FROM projects p JOIN organizations o ON o.id = p.organization_id WHERE p.id = :id`,
    { id },
  );
  return res.rows[0] ? toProject(res.rows[0]) : null;
}

export interface ProjectCounts {
  activeKeys: number;
  revokedOrExpiredKeys: number;
  webhookEndpoints: number;
  /** Executions not yet ended (queued, running, waiting) and waiting for an operator (needs_review). */
  openExecutions: number;
  needsReview: number;
  /** This month's usage counters (requests counted by the gateway, executions settled, charged). */
  month: { requests: number; executions: number; chargedMicros: number };
}

export async function projectCounts(db: Knex, projectId: string): Promise<ProjectCounts> {
  // api_keys_project_idx, webhook_endpoints_project_idx, executions_project_status_idx and the
  // usage_counters primary key: each count reads only this project's rows.
  const res = await db.raw<{
    rows: {
      active_keys: number;
      other_keys: number;
      endpoints: number;
      open: number;
      needs_review: number;
      requests: number | null;
      executions: number | null;
      charged: number | null;
    }[];
  }>(
    `SELECT (SELECT count(*) FROM api_keys k WHERE k.project_id = :projectId AND k.revoked_at IS NULL
                AND (k.expires_at IS NULL OR k.expires_at > now())) AS active_keys,
            (SELECT count(*) FROM api_keys k WHERE k.project_id = :projectId AND (k.revoked_at IS NOT NULL
                OR k.expires_at <= now())) AS other_keys,
            (SELECT count(*) FROM webhook_endpoints w WHERE w.project_id = :projectId AND w.deleted_at IS NULL) AS endpoints,
            (SELECT count(*) FROM executions e WHERE e.project_id = :projectId AND e.status IN ('queued', 'running', 'waiting')) AS open,
            (SELECT count(*) FROM executions e WHERE e.project_id = :projectId AND e.status = 'needs_review') AS needs_review,
            u.request_count AS requests, u.execution_count AS executions, u.charged_micros AS charged
       FROM (SELECT 1) one
       LEFT JOIN usage_counters u ON u.project_id = :projectId AND u.month = tes_month()`,
    { projectId },
  );
  const r = res.rows[0]!;
  return {
    activeKeys: r.active_keys,
    revokedOrExpiredKeys: r.other_keys,
    webhookEndpoints: r.endpoints,
    openExecutions: r.open,
    needsReview: r.needs_review,
    month: { requests: r.requests ?? 0, executions: r.executions ?? 0, chargedMicros: r.charged ?? 0 },
  };
}

export interface KeySummary {
  id: string;
  name: string;
  /** The public start of the secret (`tes_<lookup id>_`), enough to recognise a key someone pasted. */
  prefix: string;
  scopes: string[];
  role: string;
  createdAt: string;
  expiresAt: string | null;
  revokedAt: string | null;
  /** When the newest execution it submitted was accepted (other requests leave no row to read). */
  lastExecutionAt: string | null;
}

export async function listKeys(db: Knex, projectId: string): Promise<KeySummary[]> {
  // Never the digest: only the columns named here leave the database. A key's newest execution is
  // the first entry of executions_api_key_idx for it (a project condition here would tempt the
  // planner into a bitmap over the project's executions).
  const res = await db.raw<{
    rows: {
      id: string;
      name: string;
      lookup_id: string;
      scopes: string[];
      role: string;
      created_at: Date;
      expires_at: Date | null;
      revoked_at: Date | null;
      last_execution_at: Date | null;
    }[];
  }>(
    `SELECT k.id, k.name, k.lookup_id, k.scopes, k.role, k.created_at, k.expires_at, k.revoked_at, last.created_at AS last_execution_at
       FROM api_keys k
       LEFT JOIN LATERAL (SELECT e.created_at FROM executions e WHERE e.api_key_id = k.id ORDER BY e.id DESC LIMIT 1) last ON true
      WHERE k.project_id = :projectId
      ORDER BY k.id`,
    { projectId },
  );
  return res.rows.map((r) => ({
    id: r.id,
    name: r.name,
    prefix: `tes_${r.lookup_id}_`,
    scopes: r.scopes,
    role: r.role,
    createdAt: iso(r.created_at)!,
    expiresAt: iso(r.expires_at),
    revokedAt: iso(r.revoked_at),
    lastExecutionAt: iso(r.last_execution_at),
  }));
}

/** The journal's total per account for a project (every posting ever made). */
export async function journalTotals(db: Knex, projectId: string): Promise<Record<'funding' | 'available' | 'reserved' | 'charged', number>> {
  // ledger_project_time_idx covers (project_id) with account and amount included: an index-only scan
  const res = await db.raw<{ rows: { account: string; total: number }[] }>(
    'SELECT account, sum(amount_micros)::bigint AS total FROM ledger_entries WHERE project_id = :projectId GROUP BY account',
    { projectId },
  );
  const totals = { funding: 0, available: 0, reserved: 0, charged: 0 };
  for (const r of res.rows) totals[r.account as keyof typeof totals] = r.total;
  return totals;
}

export interface ExecutionSummary {
  id: string;
  projectId: string;
  apiKeyId: string;
  tool: string;
  model: string;
  status: ExecutionStatus;
  reservedMicros: number;
  chargedMicros: number;
  errorCode: string | null;
  createdAt: string;
  finishedAt: string | null;
}

export interface ExecutionFilter {
  projectId?: string | undefined;
  status?: ExecutionStatus | undefined;
  tool?: string | undefined;
  apiKeyId?: string | undefined;
  /** Created at or after this time. */
  since?: Date | undefined;
  /** The lowest id an execution created at `since` can have (ids are time-sortable). */
  sinceId?: string | undefined;
  /** Keyset paging: older than this id. */
  before?: string | undefined;
  limit: number;
}

/**
 * Newest first. Within a project, executions_project_{list,status,tool}_idx serve each filter
 * with the id range; across projects, needs_review has its own partial index
 * (executions_needs_review_idx), a key executions_api_key_idx, and the rest walk the primary key
 * from the newest, which --since bounds. The id bound makes --since an index range; created_at then decides exactly (the id
 * carries the gateway's clock, created_at the database's).
 */
export async function listExecutionSummaries(db: Knex, f: ExecutionFilter): Promise<{ items: ExecutionSummary[]; hasMore: boolean }> {
  const q = db('executions').select(
    'id',
    'project_id',
    'api_key_id',
    'tool',
    'model',
    'status',
    'reserved_micros',
    'charged_micros',
    'error_code',
    'created_at',
    'finished_at',
  );
  if (f.projectId !== undefined) q.where('project_id', f.projectId);
  if (f.status !== undefined) q.where('status', f.status);
  if (f.tool !== undefined) q.where('tool', f.tool);
  if (f.apiKeyId !== undefined) q.where('api_key_id', f.apiKeyId);
  if (f.sinceId !== undefined) q.where('id', '>=', f.sinceId);
  if (f.since !== undefined) q.where('created_at', '>=', f.since);
  if (f.before !== undefined) q.where('id', '<', f.before);
  const rows = await q.orderBy('id', 'desc').limit(f.limit + 1);
  return {
    hasMore: rows.length > f.limit,
    items: rows.slice(0, f.limit).map((r: Record<string, unknown>) => ({
      id: r.id as string,
      projectId: r.project_id as string,
      apiKeyId: r.api_key_id as string,
      tool: r.tool as string,
      model: r.model as string,
      status: r.status as ExecutionStatus,
      reservedMicros: r.reserved_micros as number,
      chargedMicros: r.charged_micros as number,
      errorCode: r.error_code as string | null,
      createdAt: iso(r.created_at as Date)!,
      finishedAt: iso(r.finished_at as Date | null),
    })),
  };
}

export interface JournalLine {
  entryId: number;
  transactionId: string;
  createdAt: string;
  kind: string;
  account: string;
  amountMicros: number;
  reference: string | null;
}

/** An execution's journal entries, in the order they were written (ledger_execution_idx). */
export async function executionJournal(db: Knex, executionId: string): Promise<JournalLine[]> {
  const rows = await db('ledger_entries')
    .select('id', 'transaction_id', 'created_at', 'kind', 'account', 'amount_micros', 'reference')
    .where({ execution_id: executionId })
    .orderBy('id');
  return rows.map((r: Record<string, unknown>) => ({
    entryId: r.id as number,
    transactionId: r.transaction_id as string,
    createdAt: iso(r.created_at as Date)!,
    kind: r.kind as string,
    account: r.account as string,
    amountMicros: r.amount_micros as number,
    reference: r.reference as string | null,
  }));
}

export interface ArtifactLine {
  id: string;
  stepIndex: number;
  format: string;
  sizeBytes: number;
  expiresAt: string;
  deletedAt: string | null;
}

/** An execution's artifacts (artifacts_execution_idx); never their storage keys. */
export async function executionArtifacts(db: Knex, executionId: string): Promise<ArtifactLine[]> {
  const rows = await db('artifacts')
    .select('id', 'step_index', 'format', 'size_bytes', 'expires_at', 'deleted_at')
    .where({ execution_id: executionId })
    .orderBy('id');
  return rows.map((r: Record<string, unknown>) => ({
    id: r.id as string,
    stepIndex: r.step_index as number,
    format: r.format as string,
    sizeBytes: r.size_bytes as number,
    expiresAt: iso(r.expires_at as Date)!,
    deletedAt: iso(r.deleted_at as Date | null),
  }));
}

export async function keyName(db: Knex, keyId: string): Promise<string | null> {
  const row = await db('api_keys').where({ id: keyId }).first<{ name: string } | undefined>('name');
  return row?.name ?? null;
}
