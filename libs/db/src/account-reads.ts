/**
 * The operator's reads of organizations, projects and keys (the admin CLI's), each with the
 * index that makes it cheap named beside it. Reads only; nothing here takes a lock that a
 * submit or a settlement waits for.
 */
import type { Knex } from 'knex';
import { type ProjectRecord } from './accounts';
import { iso } from './time';

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

export async function keyName(db: Knex, keyId: string): Promise<string | null> {
  const row = await db('api_keys').where({ id: keyId }).first<{ name: string } | undefined>('name');
  return row?.name ?? null;
}
