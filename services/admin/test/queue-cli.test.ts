import { newId } from '@tes/core';
import { auditLedger, claimExecution, createDb, publishPrices, submitExecution } from '@tes/db';
import { seedProject, useTestDatabase, type SeededProject } from '@tes/testing';
import { runCli } from '../src/cli';

/**
 * `admin queue show` (issue #25): the projects behind the queue gauges, which carry no
 * per-project label: per category, each project's running and queued executions and its
 * oldest wait, the projects holding most slots first.
 */
const { db, database } = useTestDatabase({ poolMax: 2 });

afterEach(async () => {
  expect((await auditLedger(db)).problems).toEqual([]);
});

async function cli(...argv: string[]) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await runCli(argv, () => createDb({ url: database.url, poolMax: 1 }), { out: (t) => out.push(t), err: (t) => err.push(t), tty: false });
  return { code, out: out.join('\n'), err: err.join('\n') };
}

async function submit(p: SeededProject, category: string, priceVersion: string): Promise<string> {
  const id = newId('exe');
  await submitExecution(db, {
    id,
    projectId: p.projectId,
    apiKeyId: p.keyId,
    tool: 'test.sleep',
    model: 'sleep',
    category,
    arguments: {},
    priceVersion,
    totalSteps: 1,
    reservedMicros: 1,
    idempotencyKey: id,
    requestDigest: 'd',
    dispatchDeadlineMs: 600_000,
  });
  return id;
}

it('lists the projects holding each category, most running first, with their line and oldest wait', async () => {
  const { priceVersion } = await publishPrices(db, { 'test.sleep': 1 });
  const noisy = await seedProject(db, { creditMicros: 1_000 });
  const quiet = await seedProject(db, { creditMicros: 1_000 });
  for (let i = 0; i < 3; i++) await claimExecution(db, await submit(noisy, 'test', priceVersion), 'w', 600_000);
  const oldest = await submit(noisy, 'test', priceVersion);
  await db.raw(`UPDATE executions SET created_at = tes_now() - interval '300 seconds' WHERE id = ?`, [oldest]);
  await submit(noisy, 'test', priceVersion);
  await submit(quiet, 'test', priceVersion);
  await claimExecution(db, await submit(quiet, 'image', priceVersion), 'w', 600_000);

  const all = await cli('queue', 'show', '--json');
  expect(all.code).toBe(0);
  const rows = (JSON.parse(all.out) as { data: Record<string, unknown>[] }).data;
  expect(rows.map((r) => [r.category, r.projectId, r.running, r.queued])).toEqual([
    ['image', quiet.projectId, 1, 0],
    ['test', noisy.projectId, 3, 2],
    ['test', quiet.projectId, 0, 1],
  ]);
  expect(rows[0]).toMatchObject({ organizationId: quiet.organizationId, oldestQueuedAgeSeconds: null });
  expect(rows[1]!.oldestQueuedAgeSeconds).toBeGreaterThanOrEqual(300);

  const one = await cli('queue', 'show', '--category', 'image');
  expect(one.code).toBe(0);
  expect(one.out).toContain(quiet.projectId);
  expect(one.out).not.toContain(noisy.projectId);
  expect((await cli('queue', 'show', '--category', 'Image; drop')).code).toBe(2);
});
