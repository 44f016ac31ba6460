import { readFile } from 'node:fs/promises';
import type { Knex } from 'knex';
import { checkPriceList, DEFAULT_PRICE_LIST } from '@tes/catalog';
import { generateKeySecret, isAppError, isScope, ROLES, SCOPES, type Role, type Scope } from '@tes/core';
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
import { MODEL_COMMANDS } from './model-commands';
import { QUEUE_COMMANDS } from './queue-commands';
import { READ_COMMANDS } from './read-commands';
import { idOption, micros, optional, PreconditionError, required, UsageError, type CommandSpec } from './spec';
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
    summary:
      'Apply pending database migrations (creates the database if missing when run through npm start). Waits for a migrate that is running; frees the lock a killed one left.',
    options: {},
    run: async (db) => {
      let staleLockFreed = false;
      const applied = await migrateLatest(db, {
        onWaiting: () => process.stderr.write('migrate: another migrate is running; waiting for it (at most 15 min)\n'),
        onStaleLock: () => {
          staleLockFreed = true;
          process.stderr.write('migrate: the migration lock was left by a migrate that is gone (killed midway); freed it\n');
        },
      });
      return { applied, staleLockFreed };
    },
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
        organizationId: idOption(required(o, 'org'), 'org', '--org'),
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
      const projectId = idOption(required(o, 'project'), 'prj', '--project');
      const role = (optional(o, 'role') ?? 'MEMBER') as Role;
      if (!ROLES.includes(role)) throw new UsageError('--role must be ADMIN or MEMBER');
      let expiresAt: Date | null = null;
      const expiresArg = optional(o, 'expires-at');
      if (expiresArg !== undefined) {
        expiresAt = new Date(expiresArg);
        if (Number.isNaN(expiresAt.getTime())) throw new UsageError('--expires-at must be an RFC 3339 time');
      }
      const { lookupId, secret } = generateKeySecret();
      return createApiKey(db, { projectId, name: required(o, 'name'), scopes: scopes as Scope[], role, expiresAt, secret, lookupId });
    },
  },
  {
    name: 'key revoke',
    summary: 'Revoke an API key (every gateway refuses it as soon as this commits).',
    options: { key: { description: 'key id (key_...)', required: true } },
    run: async (db, o) => {
      const keyId = idOption(required(o, 'key'), 'key', '--key');
      const r = await revokeApiKey(db, keyId);
      if (!r) throw new PreconditionError(`key ${keyId} not found`);
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
      return creditBalance(db, {
        projectId: idOption(required(o, 'project'), 'prj', '--project'),
        micros: amount,
        reference: optional(o, 'reference') ?? null,
      });
    },
  },
  {
    name: 'cap set',
    summary: 'Set or remove the monthly cap of a project.',
    options: { project: { description: 'project id', required: true }, micros: { description: 'cap in micro-USD, or "none"', required: true } },
    run: (db, o) =>
      setMonthlyCap(db, idOption(required(o, 'project'), 'prj', '--project'), required(o, 'micros') === 'none' ? null : micros(o.micros, '--micros')),
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
      const executionId = idOption(required(o, 'execution'), 'exe', '--execution');
      const e = await getExecutionById(db, executionId);
      if (!e) throw new PreconditionError(`execution ${executionId} not found`);
      if (e.status !== 'needs_review') throw new PreconditionError(`execution is ${e.status}; only needs_review can be resolved`);
      if (charge > e.reservedMicros) throw new PreconditionError(`--charge-micros ${charge} exceeds the reservation ${e.reservedMicros}`);
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
      if (!settled) throw new PreconditionError('the execution changed meanwhile; nothing was settled');
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
    summary: 'Print the current price list, in the form `prices publish` reads; stderr names the version to expect.',
    options: {},
    run: async (db, _o, _p, note) => {
      const current = await getCurrentPriceVersion(db);
      const version = current?.version ?? 'none';
      note(`current priceVersion ${version}: after editing, publish with --expect-version ${version}`);
      return current?.prices ?? DEFAULT_PRICE_LIST;
    },
  },
  {
    name: 'prices publish',
    summary: 'Publish a price list; any change of content gives a new priceVersion. With --expect-version, only over that version.',
    options: {
      file: { description: 'path to the price list JSON', required: true },
      'expect-version': {
        description: 'the priceVersion the file was exported from (`prices export` prints it); refused (exit 1) if someone published since. "none" before any',
      },
    },
    notes: [
      'The safe edit: npm run -s admin -- prices export > prices.json   (stderr: "current priceVersion V ...";',
      '              -s keeps npm\'s "> admin" banner out of the file)',
      '              edit prices.json; npm run admin -- prices publish --file prices.json --expect-version V',
    ],
    run: async (db, o, _p, note) => {
      let parsed: unknown;
      try {
        parsed = JSON.parse(await readFile(required(o, 'file'), 'utf8'));
      } catch (err) {
        throw new UsageError(`cannot read ${String(o.file)}: ${(err as Error).message}`);
      }
      const problems = checkPriceList(parsed);
      if (problems.length > 0) throw new UsageError(`invalid price list:\n  - ${problems.join('\n  - ')}`);
      const expected = optional(o, 'expect-version');
      if (expected !== undefined && expected !== 'none' && !/^\d{4}-\d{2}-\d{2}\.\d+$/.test(expected)) {
        throw new UsageError('--expect-version must be a priceVersion (YYYY-MM-DD.N) or none');
      }
      if (expected === undefined) note('published without --expect-version: a change published since your export would be overwritten');
      try {
        const { priceVersion, created } = await publishPrices(
          db,
          parsed,
          expected === undefined ? {} : { expectVersion: expected === 'none' ? null : expected },
        );
        return { priceVersion, created };
      } catch (err) {
        if (isAppError(err) && err.code === 'price_version_mismatch') {
          throw new PreconditionError(
            `${err.message}: someone published since your export; nothing was published. Export again, re-apply your edit, and publish with --expect-version ${(err.details?.currentVersion as string | null | undefined) ?? 'none'}`,
          );
        }
        throw err;
      }
    },
  },
  {
    name: 'ledger audit',
    summary: 'Check every money invariant over the whole history; exit status 1 when one is broken.',
    options: {},
    notes: [
      'Streams the journal and the executions in batches, in one read-only snapshot; progress on stderr, the',
      'report (JSON) on stdout. It holds sums per project and one batch: 124 MB at 10M executions with',
      'NODE_OPTIONS="--max-old-space-size=48 --max-semi-space-size=4" (291 MB with the defaults: V8 grows its',
      'heap where it may). Time grows with history: 22 s at 1M, 130 s at 10M on a 2-core host.',
      'The relay checks what changed every LEDGER_AUDIT_INTERVAL_MS; this is the whole-history check.',
    ],
    run: (db, _opts, _positionals, note) => auditLedger(db, { progress: (text) => note(`ledger audit: ${text}`) }),
  },
  ...WEBHOOK_COMMANDS,
  ...QUEUE_COMMANDS,
  ...MODEL_COMMANDS,
  ...READ_COMMANDS,
  {
    name: 'dev seed',
    summary: 'Create an organization, a project with $100 and an all-scopes ADMIN key; print them.',
    options: {},
    run: (db) => devSeed(db),
  },
];
