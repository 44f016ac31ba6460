/**
 * The read side of the admin CLI (issue #17): list and show what the write commands made, find
 * executions, export a month of the journal. Tables by default, --json for scripts; money in
 * micros and exact dollars. Nothing here writes.
 */
import type { Knex } from 'knex';
import { encodeTime } from 'ulid';
import { EXECUTION_STATUSES, type ExecutionStatus } from '@tes/core';
import {
  executionArtifacts,
  executionJournal,
  findProject,
  getExecutionById,
  getSteps,
  journalTotals,
  keyName,
  listExecutionSummaries,
  listKeys,
  listOrganizations,
  listProjects,
  listWebhookDeliveries,
  organizationExists,
  projectCounts,
  type ExecutionSummary,
  type KeySummary,
  type ProjectSummary,
} from '@tes/db';
import { fields, money, section, table } from './format';
import { exportLedger, parseMonth } from './ledger-export';
import { deliveriesTable } from './webhook-commands';
import { command, idOption, optional, PreconditionError, required, UsageError, type CommandSpec } from './spec';

type Opts = Record<string, string | boolean | undefined>;

async function existingProject(db: Knex, opts: Opts): Promise<ProjectSummary> {
  const id = idOption(required(opts, 'project'), 'prj', '--project');
  const project = await findProject(db, id);
  if (!project) throw new PreconditionError(`project ${id} not found`);
  return project;
}

const RELATIVE = /^(\d+)(m|h|d)$/;
const UNIT_MS = { m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

/** --since: an RFC 3339 time, or an age such as 90m, 24h, 7d. */
function parseSince(value: string, now: Date = new Date()): Date {
  const rel = RELATIVE.exec(value);
  if (rel) return new Date(now.getTime() - Number(rel[1]) * UNIT_MS[rel[2] as keyof typeof UNIT_MS]);
  const at = /^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2}))?$/.test(value) ? new Date(value) : null;
  if (!at || Number.isNaN(at.getTime())) throw new UsageError('--since must be an RFC 3339 time (2026-11-23T09:00:00Z, 2026-11-23) or an age (90m, 24h, 7d)');
  return at;
}

/**
 * The smallest execution id stamped at or after `at` minus a minute. Ids carry the gateway's
 * clock and created_at the database's; the minute absorbs their difference, and created_at
 * then decides exactly.
 */
function lowestIdSince(at: Date): string {
  return `exe_${encodeTime(Math.max(0, at.getTime() - 60_000), 10)}${'0'.repeat(16)}`;
}

function keyState(k: KeySummary, now = Date.now()): string {
  if (k.revokedAt) return 'revoked';
  if (k.expiresAt && Date.parse(k.expiresAt) <= now) return 'expired';
  return 'active';
}

const EXECUTION_COLUMNS = [
  { header: 'id', value: (e: ExecutionSummary) => e.id },
  { header: 'project', value: (e: ExecutionSummary) => e.projectId },
  { header: 'tool', value: (e: ExecutionSummary) => `${e.tool}/${e.model}` },
  { header: 'status', value: (e: ExecutionSummary) => e.status },
  { header: 'reserved', value: (e: ExecutionSummary) => money(e.reservedMicros), right: true },
  { header: 'charged', value: (e: ExecutionSummary) => money(e.chargedMicros), right: true },
  { header: 'error', value: (e: ExecutionSummary) => e.errorCode },
  { header: 'created', value: (e: ExecutionSummary) => e.createdAt },
];

interface ExecutionList {
  data: ExecutionSummary[];
  hasMore: boolean;
  /** Pass as --before for the next (older) page. */
  nextBefore: string | null;
}

async function runExecutionList(db: Knex, o: Opts): Promise<ExecutionList> {
  const projectArg = optional(o, 'project');
  const projectId = projectArg === undefined ? undefined : idOption(projectArg, 'prj', '--project');
  const statusArg = optional(o, 'status');
  if (statusArg !== undefined && !(EXECUTION_STATUSES as readonly string[]).includes(statusArg)) {
    throw new UsageError(`--status must be one of ${EXECUTION_STATUSES.join(', ')}`);
  }
  const limitArg = optional(o, 'limit') ?? '50';
  if (!/^\d+$/.test(limitArg) || Number(limitArg) < 1 || Number(limitArg) > 1000) throw new UsageError('--limit must be a whole number from 1 to 1000');
  const beforeArg = optional(o, 'before');
  const keyArg = optional(o, 'key');
  const sinceArg = optional(o, 'since');
  const since = sinceArg === undefined ? undefined : parseSince(sinceArg);
  if (projectId !== undefined && !(await findProject(db, projectId))) throw new PreconditionError(`project ${projectId} not found`);
  const page = await listExecutionSummaries(db, {
    projectId,
    status: statusArg as ExecutionStatus | undefined,
    tool: optional(o, 'tool'),
    apiKeyId: keyArg === undefined ? undefined : idOption(keyArg, 'key', '--key'),
    since,
    sinceId: since === undefined ? undefined : lowestIdSince(since),
    before: beforeArg === undefined ? undefined : idOption(beforeArg, 'exe', '--before'),
    limit: Number(limitArg),
  });
  return { data: page.items, hasMore: page.hasMore, nextBefore: page.hasMore ? page.items[page.items.length - 1]!.id : null };
}

async function runExecutionShow(db: Knex, positionals: string[]) {
  if (positionals.length !== 1) throw new UsageError('give one execution id: execution show exe_…');
  const id = idOption(positionals[0]!, 'exe', 'the execution id');
  const execution = await getExecutionById(db, id);
  if (!execution) throw new PreconditionError(`execution ${id} not found`);
  const [steps, journal, deliveries, artifacts, apiKeyName] = await Promise.all([
    getSteps(db, execution.projectId, [id]),
    executionJournal(db, id),
    listWebhookDeliveries(db, id),
    executionArtifacts(db, id),
    keyName(db, execution.apiKeyId),
  ]);
  // The lease owner and the request digest are internals; the idempotency key is the caller's own
  // handle for the request, kept so "the submit I resent" can be matched.
  const { leaseOwner: _leaseOwner, requestDigest: _digest, ...shown } = execution;
  return {
    execution: { ...shown, apiKeyName },
    steps: steps.map(({ checkpoint: _checkpoint, executionId: _executionId, ...s }) => s),
    journal,
    webhookDeliveries: deliveries,
    artifacts,
  };
}

function renderExecutionShow(r: Awaited<ReturnType<typeof runExecutionShow>>): string {
  const e = r.execution;
  const head = fields([
    ['id', e.id],
    ['project', e.projectId],
    ['key', `${e.apiKeyId}${e.apiKeyName ? ` (${e.apiKeyName})` : ''}`],
    ['tool', `${e.tool}/${e.model} (${e.category})`],
    ['status', `${e.status}${e.cancelRequested ? ' (cancel requested)' : ''}`],
    ['error', e.errorCode ? `${e.errorCode}: ${e.errorMessage ?? ''}` : null],
    ['price version', e.priceVersion],
    ['reserved', money(e.reservedMicros)],
    ['charged', money(e.chargedMicros)],
    ['steps', `${r.steps.length} of ${e.totalSteps}`],
    ['attempts', e.attempts],
    ['idempotency key', e.idempotencyKey],
    ['created', e.createdAt],
    ['started', e.startedAt],
    ['finished', e.finishedAt],
    ['arguments', e.arguments],
    ['output', e.output],
  ]);
  const steps = r.steps.length
    ? table(r.steps, [
        { header: '#', value: (s) => s.index, right: true },
        { header: 'name', value: (s) => s.name },
        { header: 'status', value: (s) => s.status },
        { header: 'cost', value: (s) => money(s.costMicros), right: true },
        { header: 'attempts', value: (s) => s.attempts, right: true },
        { header: 'error', value: (s) => s.errorCode },
        { header: 'external', value: (s) => s.externalRef },
        { header: 'started', value: (s) => s.startedAt },
        { header: 'finished', value: (s) => s.finishedAt },
      ])
    : null;
  const journal = r.journal.length
    ? table(r.journal, [
        { header: 'entry', value: (j) => j.entryId, right: true },
        { header: 'time', value: (j) => j.createdAt },
        { header: 'kind', value: (j) => j.kind },
        { header: 'account', value: (j) => j.account },
        { header: 'amount', value: (j) => money(j.amountMicros), right: true },
        { header: 'transaction', value: (j) => j.transactionId },
      ])
    : null;
  const deliveries = r.webhookDeliveries.length ? deliveriesTable(r.webhookDeliveries) : null;
  const artifacts = r.artifacts.length
    ? table(r.artifacts, [
        { header: 'id', value: (a) => a.id },
        { header: 'step', value: (a) => a.stepIndex, right: true },
        { header: 'format', value: (a) => a.format },
        { header: 'bytes', value: (a) => a.sizeBytes, right: true },
        { header: 'expires', value: (a) => a.expiresAt },
        { header: 'deleted', value: (a) => a.deletedAt },
      ])
    : null;
  return [head, section('steps', steps), section('journal', journal), section('webhook deliveries', deliveries), section('artifacts', artifacts)].join('\n');
}

export const READ_COMMANDS: CommandSpec[] = [
  command({
    name: 'org list',
    summary: 'List organizations with their number of projects.',
    options: {},
    run: async (db) => ({ data: await listOrganizations(db) }),
    render: (r) =>
      table(r.data, [
        { header: 'id', value: (o) => o.id },
        { header: 'name', value: (o) => o.name },
        { header: 'projects', value: (o) => o.projects, right: true },
        { header: 'created', value: (o) => o.createdAt },
      ]),
  }),
  command({
    name: 'project list',
    summary: 'List projects (of one organization with --org) with their balances and caps.',
    options: { org: { description: 'only the projects of this organization (org_...)' } },
    run: async (db, o) => {
      const orgArg = optional(o, 'org');
      const org = orgArg === undefined ? undefined : idOption(orgArg, 'org', '--org');
      if (org !== undefined && !(await organizationExists(db, org))) throw new PreconditionError(`organization ${org} not found`);
      return { data: await listProjects(db, org) };
    },
    render: (r) =>
      table(r.data, [
        { header: 'id', value: (p) => p.id },
        { header: 'org', value: (p) => p.organizationId },
        { header: 'name', value: (p) => p.name },
        { header: 'available', value: (p) => money(p.availableMicros), right: true },
        { header: 'reserved', value: (p) => money(p.reservedMicros), right: true },
        { header: 'month charged', value: (p) => money(p.monthChargedMicros), right: true },
        { header: 'monthly cap', value: (p) => (p.monthlyCapMicros === null ? 'none' : money(p.monthlyCapMicros)), right: true },
      ]),
  }),
  command({
    name: 'project show',
    summary: 'One project: organization, balances, cap, keys, webhook endpoints, open and needs_review executions, this month.',
    options: { project: { description: 'project id (prj_...)', required: true } },
    run: async (db, o) => {
      const project = await existingProject(db, o);
      return { ...project, ...(await projectCounts(db, project.id)) };
    },
    render: (p) =>
      fields([
        ['id', p.id],
        ['name', p.name],
        ['organization', `${p.organizationId} (${p.organizationName})`],
        ['created', p.createdAt],
        ['available', money(p.availableMicros)],
        ['reserved', money(p.reservedMicros)],
        ['monthly cap', p.monthlyCapMicros === null ? 'none' : money(p.monthlyCapMicros)],
        ['charged this month', money(p.monthChargedMicros)],
        ['requests this month', p.month.requests],
        ['executions settled this month', p.month.executions],
        ['keys', `${p.activeKeys} active, ${p.revokedOrExpiredKeys} revoked or expired`],
        ['webhook endpoints', p.webhookEndpoints],
        ['open executions', p.openExecutions],
        ['needs review', p.needsReview],
      ]),
  }),
  command({
    name: 'key list',
    summary: "List a project's API keys: id, prefix, scopes, state, last execution. Never the secret or its digest.",
    options: { project: { description: 'project id (prj_...)', required: true } },
    notes: [
      'PREFIX is the public start of the secret (tes_<lookup id>_): match it against a key someone pasted.',
      'LAST EXECUTION is when the newest execution the key submitted was accepted; other requests are not recorded.',
    ],
    run: async (db, o) => {
      const project = await existingProject(db, o);
      return { data: (await listKeys(db, project.id)).map((k) => ({ ...k, state: keyState(k) })) };
    },
    render: (r) =>
      table(r.data, [
        { header: 'id', value: (k) => k.id },
        { header: 'name', value: (k) => k.name },
        { header: 'prefix', value: (k) => k.prefix },
        { header: 'role', value: (k) => k.role },
        { header: 'scopes', value: (k) => k.scopes.join(',') },
        { header: 'state', value: (k) => k.state },
        { header: 'created', value: (k) => k.createdAt },
        { header: 'expires', value: (k) => k.expiresAt },
        { header: 'revoked', value: (k) => k.revokedAt },
        { header: 'last execution', value: (k) => k.lastExecutionAt },
      ]),
  }),
  command({
    name: 'balance show',
    summary: "A project's money: available, reserved, credited and charged in all, this month against the cap.",
    options: { project: { description: 'project id (prj_...)', required: true } },
    notes: ['"journal agrees" compares the balance row with the sum of its journal entries (as ledger audit does for every project).'],
    run: async (db, o) => {
      const p = await existingProject(db, o);
      const journal = await journalTotals(db, p.id);
      return {
        projectId: p.id,
        availableMicros: p.availableMicros,
        reservedMicros: p.reservedMicros,
        // credits post negative on the funding account
        creditedMicros: -journal.funding,
        chargedMicros: journal.charged,
        monthlyCapMicros: p.monthlyCapMicros,
        monthChargedMicros: p.monthChargedMicros,
        capRemainingMicros: p.monthlyCapMicros === null ? null : Math.max(0, p.monthlyCapMicros - p.monthChargedMicros - p.reservedMicros),
        journalAgrees: journal.available === p.availableMicros && journal.reserved === p.reservedMicros,
      };
    },
    render: (b) =>
      fields([
        ['project', b.projectId],
        ['available', money(b.availableMicros)],
        ['reserved', money(b.reservedMicros)],
        ['credited in all', money(b.creditedMicros)],
        ['charged in all', money(b.chargedMicros)],
        ['monthly cap', b.monthlyCapMicros === null ? 'none' : money(b.monthlyCapMicros)],
        ['charged this month', money(b.monthChargedMicros)],
        ['cap remaining', b.capRemainingMicros === null ? 'no cap' : money(b.capRemainingMicros)],
        ['journal agrees', b.journalAgrees ? 'yes' : 'NO (run ledger audit)'],
      ]),
  }),
  command({
    name: 'execution list',
    summary: 'Find executions, newest first: by project, status, tool, key, age. Without --project, across all projects.',
    options: {
      project: { description: 'project id (prj_...); omit for every project' },
      status: { description: EXECUTION_STATUSES.join('|') },
      tool: { description: 'tool name, e.g. image.render' },
      key: { description: 'only what this API key submitted (key_...): after a key leaked, what did it run?' },
      since: { description: 'created at or after: RFC 3339 time, or an age (90m, 24h, 7d)' },
      before: { description: 'older than this execution id (the next page: the nextBefore of the previous one)' },
      limit: { description: 'at most this many, 1-1000 (default 50)' },
    },
    notes: ['Which executions need review?   admin execution list --status needs_review', 'Then: admin execution show exe_…, and admin execution resolve.'],
    run: (db, o) => runExecutionList(db, o),
    render: (r) => {
      const body = r.data.length ? table(r.data, EXECUTION_COLUMNS) : '(no executions match)';
      return r.nextBefore ? `${body}\n\n${r.data.length} shown; older ones: --before ${r.nextBefore}` : body;
    },
  }),
  command({
    name: 'execution show',
    summary: 'One execution with its steps, journal entries, webhook deliveries and artifacts.',
    options: {},
    positionals: 'exe_…',
    run: (db, _o, positionals) => runExecutionShow(db, positionals),
    render: renderExecutionShow,
  }),
  command({
    name: 'ledger export',
    summary: "A project's journal entries of one UTC month, as CSV (default) or JSON lines, for reconciliation.",
    options: {
      project: { description: 'project id (prj_...)', required: true },
      month: { description: 'UTC month, YYYY-MM', required: true },
      format: { description: 'csv (default) or jsonl' },
    },
    notes: [
      'Columns: entry_id, transaction_id (the postings of one money movement), created_at (UTC, microseconds),',
      'project_id, execution_id, tool, model, kind (credit|reserve|settle|resolve), account',
      '(funding|available|reserved|charged), amount_micros, amount_usd, balance_after_micros, balance_after_usd',
      "(the account's running total from the project's first entry), reference (a credit's payment reference).",
      "Spend in the month: the sum of the charged account's amounts. Every transaction sums to zero.",
    ],
    run: async (db, o) => {
      const month = parseMonth(required(o, 'month'));
      if (!month) throw new UsageError('--month must be YYYY-MM, e.g. 2026-11');
      const format = optional(o, 'format') ?? 'csv';
      if (format !== 'csv' && format !== 'jsonl') throw new UsageError('--format must be csv or jsonl');
      const project = await existingProject(db, o);
      return exportLedger(db, { projectId: project.id, month, format: format });
    },
  }),
];
