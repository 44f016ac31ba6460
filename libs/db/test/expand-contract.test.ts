import { randomBytes } from 'node:crypto';
import { newId } from '@tes/core';
import {
  auditLedger,
  claimExecution,
  MIGRATIONS,
  enterWaiting,
  finishStep,
  publishPrices,
  reapExpiredLeases,
  recordExternalRef,
  recordUpload,
  releaseLease,
  renewLease,
  settleExecution,
  startStep,
  sweepExpired,
} from '@tes/db';
import { seedProject, useTestDatabase, type SeededProject } from '@tes/testing';
import * as older from './previous-release/older-statements';
import * as previous from './previous-release/statements';

/**
 * Expand/contract (deploy/README.md): migrations run first, then pods of the previous release run
 * beside the new ones until the rollout ends, and a rollback rolls the images back, not the
 * schema. So a migration must leave the previous release's writes safe. This file runs them,
 * verbatim (previous-release/statements.ts, refreshed at each release), against the newest
 * schema beside the new code; and the writes of an older release (older-statements.ts) that
 * issue #26 found bringing back fixed defects: NULL deadlines, no execution_files rows, claims
 * that do not count `claims`.
 */
const { db } = useTestDatabase({ poolMax: 4 });

let p: SeededProject;
let priceVersion: string;
beforeAll(async () => {
  p = await seedProject(db, { creditMicros: 1_000_000 });
  ({ priceVersion } = await publishPrices(db, { 'test.sleep': 1 }));
});

/** Moves the database's clock (tes_now(); the old statements read now()) `ms` ahead of real time. */
async function clockAhead(ms: number): Promise<void> {
  await db.raw(
    `CREATE OR REPLACE FUNCTION tes_now() RETURNS timestamptz LANGUAGE sql STABLE PARALLEL SAFE AS $$ SELECT now() + interval '${ms} milliseconds' $$`,
  );
}
afterEach(async () => {
  await clockAhead(0);
  // whatever mix of writers moved the money, the journal and the balances agree
  expect((await auditLedger(db)).problems).toEqual([]);
  // and whoever moved the executions, execution_line (the claim's line, kept by triggers) is the live ones
  const line = await db.raw<{ rows: { n: string }[] }>(
    `WITH t AS (SELECT execution_id AS id, category, project_id, status, created_at FROM execution_line),
          e AS (SELECT id, category, project_id, status, created_at FROM executions WHERE status IN ('queued', 'running'))
     SELECT count(*) AS n FROM ((SELECT * FROM t EXCEPT SELECT * FROM e) UNION ALL (SELECT * FROM e EXCEPT SELECT * FROM t)) d`,
  );
  expect(Number(line.rows[0]!.n)).toBe(0);
});

const reap = () => reapExpiredLeases(db, { limit: 1_000, maxAttempts: 5, redispatchMs: 60_000 });
const outboxRows = async (id: string) => Number((await db('outbox').where({ execution_id: id }).count({ n: '*' }).first())!.n);

async function olderSubmit(args: Record<string, unknown> = {}): Promise<string> {
  const id = newId('exe');
  const written = await older.submit(db, {
    id,
    projectId: p.projectId,
    apiKeyId: p.keyId,
    priceVersion,
    reservedMicros: 1_000,
    idempotencyKey: id,
    arguments: args,
  });
  expect(written).toBe(true);
  return id;
}

describe('an older release (before migrations 10-12) writing beside the new schema', () => {
  it('a queued execution it submitted (no deadline) is re-dispatched by the reaper when its message is lost', async () => {
    const id = await olderSubmit();
    expect(await outboxRows(id)).toBe(1); // its own message, which the broker then loses
    await clockAhead(2 * 60_000);
    expect((await reap()).requeued).toContain(id);
    expect(await outboxRows(id)).toBe(2);
  });

  it('an execution its releaseLease handed back (deadline NULL) is re-dispatched, spending no attempt', async () => {
    const id = await olderSubmit();
    expect(await older.claim(db, id, 'wrk_old', 30_000)).toEqual({ firstClaim: true });
    expect(await older.releaseLease(db, id, 'wrk_old')).toBe(true);
    await clockAhead(2 * 60_000);
    const reaped = await reap();
    expect(reaped.requeued).toContain(id);
    expect(reaped.leasesLost).not.toContain(id);
    expect(await db('executions').where({ id }).first()).toMatchObject({ status: 'running', lease_owner: null, attempts: 1 });
    // and a new worker takes it from there
    expect(await claimExecution(db, id, 'wrk_new', 30_000)).toMatchObject({ lease: 'wrk_new:1', stepsRecorded: false });
  });

  it('the janitor keeps an expired upload that a queued execution it submitted reads', async () => {
    const sha = randomBytes(32).toString('hex');
    const { file } = await recordUpload(db, {
      projectId: p.projectId,
      sha256: sha,
      format: 'png',
      mimeType: 'image/png',
      sizeBytes: 1,
      storageKey: `k/${sha}`,
      retentionMs: 60_000,
    });
    const id = await olderSubmit({ slides: [{ fileId: file.id }], prompt: 'a cat' });
    await clockAhead(10 * 60_000); // the upload is past its expiry; the execution is still queued
    const deleted: string[] = [];
    await sweepExpired(db, 'files', 1_000, async (key) => void deleted.push(key));
    expect(deleted).not.toContain(`k/${sha}`);
    expect(await db('files').where({ id: file.id }).first()).toMatchObject({ deleted_at: null });
    // once the execution ends, the upload goes
    const lease = (await claimExecution(db, id, 'wrk_new', 30_000))!.lease;
    expect(
      await settleExecution(db, { executionId: id, projectId: p.projectId, status: 'failed', chargedMicros: 0, from: ['running'], leaseOwner: lease }),
    ).not.toBeNull();
    await sweepExpired(db, 'files', 1_000, async (key) => void deleted.push(key));
    expect(deleted).toContain(`k/${sha}`);
  });

  it('a new claim after its claim that ran step 0 reads the steps, so step 0 is not run again', async () => {
    const id = await olderSubmit();
    expect(await older.claim(db, id, 'wrk_old', 30_000)).toEqual({ firstClaim: true });
    expect(await older.startStep(db, { executionId: id, projectId: p.projectId, index: 0, owner: 'wrk_old', external: true })).toBe(true);
    expect(await older.finishStep(db, { executionId: id, index: 0, owner: 'wrk_old', status: 'succeeded', costMicros: 400 })).toBe(true);
    expect(await older.releaseLease(db, id, 'wrk_old')).toBe(true);
    // its claim did not count `claims`: by that count this would be a first claim
    expect(await db('executions').where({ id }).first()).toMatchObject({ claims: 0 });
    const claimed = await claimExecution(db, id, 'wrk_new', 30_000);
    expect(claimed).toMatchObject({ stepsRecorded: true });
  });
});

describe('the previous release writing beside the new schema and the new code', () => {
  it('runs its whole path: submit with an upload, claim, steps, a provider reference, hand-back, settle', async () => {
    const sha = randomBytes(32).toString('hex');
    const { file } = await recordUpload(db, {
      projectId: p.projectId,
      sha256: sha,
      format: 'png',
      mimeType: 'image/png',
      sizeBytes: 1,
      storageKey: `k/${sha}`,
      retentionMs: 60_000,
    });
    const id = newId('exe');
    const base = { projectId: p.projectId, apiKeyId: p.keyId, priceVersion, reservedMicros: 2_000, idempotencyKey: id, dispatchDeadlineMs: 60_000 };
    expect(await previous.submit(db, { ...base, id, arguments: { image: file.id }, fileIds: [file.id] })).toBe(true);
    expect(await db('execution_files').where({ execution_id: id })).toHaveLength(1);
    expect(await previous.claim(db, id, 'wrk_prev', 30_000)).toEqual({ leaseOwner: 'wrk_prev', firstClaim: true });
    expect(await previous.renewLease(db, id, 'wrk_prev', 30_000)).toBe(true);
    expect(await previous.startStep(db, { executionId: id, projectId: p.projectId, index: 0, owner: 'wrk_prev' })).toBe('started');
    expect(await previous.finishStep(db, { executionId: id, index: 0, owner: 'wrk_prev', status: 'succeeded', costMicros: 300 })).toBe(true);
    expect(await previous.releaseLease(db, id, 'wrk_prev', 60_000)).toBe(true);
    // a new worker resumes after step 0 ...
    const claimed = (await claimExecution(db, id, 'wrk_new', 30_000))!;
    expect(claimed).toMatchObject({ lease: 'wrk_new:2', stepsRecorded: true });
    expect(await startStep(db, { executionId: id, projectId: p.projectId, index: 1, name: 's1', owner: claimed.lease, external: true })).toBe('started');
    expect(await recordExternalRef(db, { executionId: id, index: 1, owner: claimed.lease, externalRef: 'job-1' })).toBe(true);
    expect(await enterWaiting(db, { executionId: id, owner: claimed.lease, recheckDeadlineMs: 60_000 })).toBe(true);
    // ... and the previous release's worker takes the re-check, which it knows is not a first claim
    expect(await previous.claim(db, id, 'wrk_prev2', 30_000)).toEqual({ leaseOwner: 'wrk_prev2', firstClaim: false });
    expect(await previous.finishStep(db, { executionId: id, index: 1, owner: 'wrk_prev2', status: 'succeeded', costMicros: 500 })).toBe(true);
    expect(await previous.settle(db, { executionId: id, projectId: p.projectId, status: 'succeeded', chargedMicros: 800, leaseOwner: 'wrk_prev2' })).toBe(800);
    expect(await db('executions').where({ id }).first()).toMatchObject({ status: 'succeeded', charged_micros: 800, lease_expires_at: null });
  });

  it('its workers and the new ones fence each other out, even under one worker id', async () => {
    const id = newId('exe');
    const base = { projectId: p.projectId, apiKeyId: p.keyId, priceVersion, reservedMicros: 2_000, idempotencyKey: id, dispatchDeadlineMs: 60_000 };
    expect(await previous.submit(db, { ...base, id, arguments: {} })).toBe(true);
    // a new worker holds the lease: a previous-release worker's writes, by bare worker id, change nothing
    const claimed = (await claimExecution(db, id, 'wrk_same', 30_000))!;
    expect(await startStep(db, { executionId: id, projectId: p.projectId, index: 0, name: 's0', owner: claimed.lease, external: true })).toBe('started');
    expect(await recordExternalRef(db, { executionId: id, index: 0, owner: claimed.lease, externalRef: 'job-new' })).toBe(true);
    const old = { executionId: id, projectId: p.projectId, owner: 'wrk_same' };
    expect(await previous.renewLease(db, id, 'wrk_same', 30_000)).toBe(false);
    expect(await previous.startStep(db, { ...old, index: 1 })).toBe('lease_lost');
    expect(await previous.recordExternalRef(db, { ...old, index: 0, externalRef: 'job-old' })).toBe(false);
    expect(await previous.finishStep(db, { ...old, index: 0, status: 'succeeded', costMicros: 1 })).toBe(false);
    expect(await previous.enterWaiting(db, { executionId: id, owner: 'wrk_same', recheckDeadlineMs: 1 })).toBe(false);
    expect(await previous.releaseLease(db, id, 'wrk_same', 1)).toBe(false);
    expect(await previous.settle(db, { executionId: id, projectId: p.projectId, status: 'succeeded', chargedMicros: 1, leaseOwner: 'wrk_same' })).toBeNull();
    // the claim cannot be taken by the previous release while it is live
    expect(await previous.claim(db, id, 'wrk_prev', 30_000)).toBeNull();
    expect(await db('execution_steps').where({ execution_id: id })).toEqual([expect.objectContaining({ status: 'running', external_ref: 'job-new' })]);

    // the lease expires and a previous-release worker takes it: the new worker's stale writes change nothing
    await clockAhead(60_000);
    expect(await previous.claim(db, id, 'wrk_prev', 30_000)).toEqual({ leaseOwner: 'wrk_prev', firstClaim: false });
    expect(await renewLease(db, id, claimed.lease, 30_000)).toBeNull();
    expect(await recordExternalRef(db, { executionId: id, index: 0, owner: claimed.lease, externalRef: 'job-stale' })).toBe(false);
    expect(await finishStep(db, { executionId: id, projectId: p.projectId, index: 0, owner: claimed.lease, status: 'failed', costMicros: 0 })).toBe(false);
    expect(await releaseLease(db, id, claimed.lease, 1)).toBe(false);
    expect(await previous.settle(db, { executionId: id, projectId: p.projectId, status: 'failed', chargedMicros: 0, leaseOwner: 'wrk_prev' })).toBe(0);
  });
});

describe('the migrations the previous release runs beside', () => {
  // The contract half of a change waits a release: what the previous release reads or writes is
  // neither dropped nor renamed, nor made to refuse its writes, by a migration it runs beside.
  const since = MIGRATIONS.findIndex(([name]) => name === previous.LAST_MIGRATION);
  const FORBIDDEN = /\b(DROP\s+(COLUMN|TABLE|FUNCTION|TRIGGER)|RENAME|SET\s+NOT\s+NULL|ADD\s+CONSTRAINT|ALTER\s+COLUMN\s+\w+\s+(SET\s+DATA\s+)?TYPE)\b/i;
  // A migration that does one of those and was reviewed as safe beside the previous release (a
  // trigger dropped and re-created in one transaction, a constraint its writes always meet): its
  // name and why. Cleared at each release with statements.ts.
  const REVIEWED: Record<string, string> = {
    // CHECK (audit_xid IS NOT NULL) NOT VALID: the column's default (pg_current_xact_id()) fills
    // it on every insert that does not name it, which is every journal insert of the previous
    // release; NOT VALID leaves the rows written before it alone.
    '20261126000040_ledger_audit_cursor': 'a constraint every previous-release insert meets through the column default',
    // an index rebuilt beside the old one takes its name (swap): the previous release names no
    // index, and its only user of this one, the reaper, bounds lease_expires_at as the new one needs
    '20261127000010_lease_index_needs_its_column': 'an index renamed to the name of the one it replaces, in one transaction',
  };

  it('are known: previous-release/statements.ts names the last migration of the previous release', () => {
    expect(since).toBeGreaterThanOrEqual(0);
  });

  it.each(MIGRATIONS.slice(since + 1).map(([name, m]) => [name, m] as const))('%s only expands the schema', (name, migration) => {
    const source = migration.up.toString();
    expect(source).toMatch(/knex\.raw/); // its SQL is in the text read here
    if (REVIEWED[name] === undefined) expect(source).not.toMatch(FORBIDDEN);
  });
});
