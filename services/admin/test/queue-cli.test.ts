import { newId } from '@tes/core';
import { claimNextFair, createDb, heartbeatWorkerSlots, publishPrices } from '@tes/db';
import { seedProject, submitTestExecution, useTestDatabase, type SeededProject } from '@tes/testing';
import { runCli } from '../src/cli';

/**
 * `admin projects set-limit` and `admin queue show` (issue #25): an operator sets a project's
 * limit in a category, the next claim holds to it, and `queue show` names the projects that
 * hold and queue the category now, with their limits.
 */
const { db, database } = useTestDatabase({ poolMax: 3 });

async function cli(...argv: string[]) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await runCli(
    argv,
    () => createDbFor(),
    { out: (t) => out.push(t), err: (t) => err.push(t) },
    { webhookAllowPrivate: false, projectSlotShare: 0.5 },
  );
  return { code, out: out.join('\n'), err: err.join('\n'), json: () => JSON.parse(out.join('\n')) };
}

function createDbFor() {
  return createDb({ url: database.url, poolMax: 1 });
}

async function queue(p: SeededProject, n: number): Promise<void> {
  const { priceVersion } = await publishPrices(db, { 'test.sleep': 1 });
  for (let i = 0; i < n; i++) await submitTestExecution(db, p, { priceVersion, reservedMicros: 10 });
}

const claim = () => claimNextFair(db, { category: 'test', owner: 'wrk_cli', leaseTtlMs: 60_000, share: 0.5, ownSlots: 1 });

it('a limit set for a project holds at the next claim; --clear gives the default back; queue show names the holders', async () => {
  // 8 live slots: the default limit is 4
  await heartbeatWorkerSlots(db, 'wrk_cli', { test: 8 });
  const a = await seedProject(db, { creditMicros: 1_000_000 });
  const b = await seedProject(db, { creditMicros: 1_000_000 });
  await queue(a, 6);
  await queue(b, 1);

  expect((await cli('projects', 'set-limit', a.projectId, '--category', 'test', '--max-running', '2')).json()).toEqual({
    projectId: a.projectId,
    category: 'test',
    maxRunning: 2,
  });
  const claimed = [];
  for (let i = 0; i < 5; i++) claimed.push((await claim())?.projectId ?? null);
  // a, b, a, then a is at its limit of 2: nothing more
  expect(claimed).toEqual([a.projectId, b.projectId, a.projectId, null, null]);

  const shown = (await cli('queue', 'show', '--category', 'test', '--json')).json();
  expect(shown).toMatchObject({ category: 'test', liveSlots: 8, defaultLimit: 4, running: 3, queued: 4 });
  expect(shown.projects[0]).toMatchObject({ projectId: a.projectId, organizationId: a.organizationId, running: 2, queued: 4, limit: 2, overridden: true });
  expect(shown.projects[1]).toMatchObject({ projectId: b.projectId, running: 1, queued: 0, limit: 4, overridden: false, oldestQueuedSeconds: null });
  const table = (await cli('queue', 'show', '--category', 'test', '--table', '--top', '1')).out;
  expect(table).toContain(a.projectId);
  expect(table).not.toContain(b.projectId);
  expect(table).toMatch(/2 \(set\)/);

  expect((await cli('projects', 'set-limit', a.projectId, '--category', 'test', '--clear')).json()).toMatchObject({ maxRunning: null, removed: true });
  expect((await claim())?.projectId).toBe(a.projectId);
  expect((await claim())?.projectId).toBe(a.projectId);
  expect(await claim()).toBeNull(); // the default, 4
});

it('refuses bad usage with exit 2 and an unknown project with exit 1, writing nothing', async () => {
  const p = await seedProject(db);
  expect((await cli('projects', 'set-limit', p.projectId, '--category', 'nope', '--max-running', '2')).code).toBe(2);
  expect((await cli('projects', 'set-limit', p.projectId, '--category', 'test', '--max-running', '0')).code).toBe(2);
  expect((await cli('projects', 'set-limit', p.projectId, '--category', 'test')).code).toBe(2);
  expect((await cli('projects', 'set-limit', p.projectId, '--category', 'test', '--max-running', '3', '--clear')).code).toBe(2);
  expect((await cli('projects', 'set-limit', 'nope', '--category', 'test', '--max-running', '3')).code).toBe(2);
  expect((await cli('projects', 'set-limit', newId('prj'), '--category', 'test', '--max-running', '3')).code).toBe(1);
  expect((await cli('queue', 'show', '--category', 'test', '--top', 'x')).code).toBe(2);
  expect(Number((await db('project_category_limits').count({ n: '*' }).where({ project_id: p.projectId }).first())!.n)).toBe(0);
});
