import { readFile } from 'node:fs/promises';
import type { Knex } from 'knex';
import { checkPriceList, DEFAULT_PRICE_LIST } from '@tes/catalog';
import { generateKeySecret, isScope, ROLES, SCOPES, type Role, type Scope } from '@tes/core';
import {
  auditLedger,
  createApiKey,
  createOrganization,
  createProject,
  creditBalance,
  getCurrentPriceVersion,
  getExecutionById,
  migrateLatest,
  publishPrices,
  revokeApiKey,
  setExecutionEnabled,
  setMonthlyCap,
  settleExecution,
} from '@tes/db';
import { micros, required, UsageError, type CommandSpec } from './spec';
import { WEBHOOK_COMMANDS } from './webhook-commands';

async function devSeed(db: Knex): Promise<{ organizationId: string; projectId: string; keyId: string; secret: string; availableMicros: number }> {
  const org = await createOrganization(db, 'Development');
  const project = await createProject(db, { organizationId: org.id, name: 'Development project' });
  const { lookupId, secret } = generateKeySecret();
  const key = await createApiKey(db, { projectId: project.id, name: 'dev', scopes: [...SCOPES], role: 'ADMIN', secret, lookupId });
  const { availableMicros } = await creditBalance(db, { projectId: project.id, micros: 100_000_000, reference: 'dev seed' });
  return { organizationId: org.id, projectId: project.id, keyId: key.id, secret, availableMicros };
}

export const COMMANDS: CommandSpec[] = [
  {
    name: 'migrate',
    summary: 'Apply pending database migrations (creates the database if missing when run through npm start).',
    options: {},
    run: async (db) => ({ applied: await migrateLatest(db) }),
  },
  {
    name: 'org create',
    summary: 'Create an organization.',
    options: { name: { description: 'organization name', required: true } },
    run: (db, o) => createOrganization(db, required(o, 'name')),
  },
  {
    name: 'project create',
    summary: 'Create a project in an organization.',
    options: {
      org: { description: 'organization id (org_...)', required: true },
      name: { description: 'project name', required: true },
      'monthly-cap-micros': { description: 'optional monthly spending cap in micro-USD' },
    },
    run: (db, o) =>
      createProject(db, {
        organizationId: required(o, 'org'),
        name: required(o, 'name'),
        monthlyCapMicros: o['monthly-cap-micros'] === undefined ? null : micros(o['monthly-cap-micros'], '--monthly-cap-micros'),
      }),
  },
  {
    name: 'key create',
    summary: 'Create an API key; the secret is printed once and never stored.',
    options: {
      project: { description: 'project id (prj_...)', required: true },
      name: { description: 'key name', required: true },
      scopes: { description: `comma-separated subset of ${SCOPES.join(',')}`, required: true },
      role: { description: 'ADMIN or MEMBER (default MEMBER)' },
      'expires-at': { description: 'optional RFC 3339 expiry time' },
    },
    run: async (db, o) => {
      const scopes = required(o, 'scopes')
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean);
      const bad = scopes.filter((s) => !isScope(s));
      if (bad.length > 0 || scopes.length === 0) throw new UsageError(`unknown scopes: ${bad.join(', ') || '(none given)'}; allowed: ${SCOPES.join(', ')}`);
      const role = (o.role ?? 'MEMBER') as Role;
      if (!ROLES.includes(role)) throw new UsageError('--role must be ADMIN or MEMBER');
      let expiresAt: Date | null = null;
      if (o['expires-at'] !== undefined) {
        expiresAt = new Date(o['expires-at']);
        if (Number.isNaN(expiresAt.getTime())) throw new UsageError('--expires-at must be an RFC 3339 time');
      }
      const { lookupId, secret } = generateKeySecret();
      return createApiKey(db, { projectId: required(o, 'project'), name: required(o, 'name'), scopes: scopes as Scope[], role, expiresAt, secret, lookupId });
    },
  },
  {
    name: 'key revoke',
    summary: 'Revoke an API key (every gateway refuses it as soon as this commits).',
    options: { key: { description: 'key id (key_...)', required: true } },
    run: async (db, o) => {
      const r = await revokeApiKey(db, required(o, 'key'));
      if (!r) throw new UsageError(`key ${o.key} not found`);
      return r;
    },
  },
  {
    name: 'balance credit',
    summary: 'Add prepaid funds to a project (one journal entry). With --reference, retrying is safe: the same reference credits once.',
    options: {
      project: { description: 'project id', required: true },
      micros: { description: 'amount in micro-USD, > 0', required: true },
      reference: { description: 'payment reference (an invoice or payment id): a retried credit with the same reference is a no-op' },
    },
    run: async (db, o) => {
      const amount = micros(o.micros, '--micros');
      if (amount <= 0) throw new UsageError('--micros must be greater than 0');
      return creditBalance(db, { projectId: required(o, 'project'), micros: amount, reference: o.reference ?? null });
    },
  },
  {
    name: 'cap set',
    summary: 'Set or remove the monthly cap of a project.',
    options: { project: { description: 'project id', required: true }, micros: { description: 'cap in micro-USD, or "none"', required: true } },
    run: (db, o) => setMonthlyCap(db, required(o, 'project'), required(o, 'micros') === 'none' ? null : micros(o.micros, '--micros')),
  },
  {
    name: 'execution resolve',
    summary: 'Resolve a needs_review execution into succeeded or failed with a charge (settles its reservation).',
    options: {
      execution: { description: 'execution id (exe_...)', required: true },
      status: { description: 'succeeded or failed', required: true },
      'charge-micros': { description: 'amount to charge, at most the reservation', required: true },
    },
    run: async (db, o) => {
      const status = required(o, 'status');
      if (status !== 'succeeded' && status !== 'failed') throw new UsageError('--status must be succeeded or failed');
      const charge = micros(o['charge-micros'], '--charge-micros');
      const e = await getExecutionById(db, required(o, 'execution'));
      if (!e) throw new UsageError(`execution ${o.execution} not found`);
      if (e.status !== 'needs_review') throw new UsageError(`execution is ${e.status}; only needs_review can be resolved`);
      if (charge > e.reservedMicros) throw new UsageError(`--charge-micros ${charge} exceeds the reservation ${e.reservedMicros}`);
      const settled = await settleExecution(db, {
        executionId: e.id,
        projectId: e.projectId,
        status,
        chargedMicros: charge,
        from: ['needs_review'],
        kind: 'resolve',
        output: e.output,
        errorCode: status === 'failed' ? (e.errorCode ?? 'provider_error') : null,
        errorMessage: status === 'failed' ? e.errorMessage : null,
      });
      if (!settled) throw new UsageError('the execution changed meanwhile; nothing was settled');
      return { id: e.id, status, chargedMicros: settled.chargedMicros, reservedMicros: settled.reservedMicros };
    },
  },
  {
    name: 'execution-enabled set',
    summary: 'Switch paid execution on or off for every project (quotes keep working).',
    options: {},
    positionals: 'true|false',
    run: async (db, _o, pos) => {
      const v = pos[0];
      if (v !== 'true' && v !== 'false') throw new UsageError('give true or false');
      await setExecutionEnabled(db, v === 'true');
      return { executionEnabled: v === 'true' };
    },
  },
  {
    name: 'prices export',
    summary: 'Print the current price list, in the form `prices publish` reads.',
    options: {},
    run: async (db) => (await getCurrentPriceVersion(db))?.prices ?? DEFAULT_PRICE_LIST,
  },
  {
    name: 'prices publish',
    summary: 'Publish a price list; any change of content gives a new priceVersion.',
    options: { file: { description: 'path to the price list JSON', required: true } },
    run: async (db, o) => {
      let parsed: unknown;
      try {
        parsed = JSON.parse(await readFile(required(o, 'file'), 'utf8'));
      } catch (err) {
        throw new UsageError(`cannot read ${o.file}: ${(err as Error).message}`);
      }
      const problems = checkPriceList(parsed);
      if (problems.length > 0) throw new UsageError(`invalid price list:\n  - ${problems.join('\n  - ')}`);
      const { priceVersion } = await publishPrices(db, parsed);
      return { priceVersion };
    },
  },
  {
    name: 'ledger audit',
    summary: 'Check every money invariant; exit status 1 when one is broken.',
    options: {},
    run: (db) => auditLedger(db),
  },
  ...WEBHOOK_COMMANDS,
  {
    name: 'dev seed',
    summary: 'Create an organization, a project with $100 and an all-scopes ADMIN key; print them.',
    options: {},
    run: (db) => devSeed(db),
  },
];
