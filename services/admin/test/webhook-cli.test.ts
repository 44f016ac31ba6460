import { createDb } from '@tes/db';
import { seedProject, useTestDatabase } from '@tes/testing';
import { runCli } from '../src/cli';

const { db, database: tdb } = useTestDatabase({ poolMax: 2 });

async function cli(...argv: string[]) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await runCli(argv, () => createDb({ url: tdb.url, poolMax: 1 }), { out: (t) => out.push(t), err: (t) => err.push(t), tty: true });
  return { code, out: out.join('\n'), err: err.join('\n'), json: () => JSON.parse(out.join('\n')) as Record<string, unknown> };
}

it('webhook create prints the secret once; list never shows it; delete ends pending deliveries', async () => {
  const p = await seedProject(db);
  const created = await cli(
    'webhook',
    'create',
    '--project',
    p.projectId,
    '--url',
    'https://hooks.example.test/tes',
    '--events',
    'execution.succeeded,execution.failed',
  );
  expect(created.code).toBe(0);
  const e = created.json();
  expect(e).toEqual({
    id: expect.stringMatching(/^whk_[0-9A-Z]{26}$/),
    secret: expect.stringMatching(/^whsec_[A-Za-z0-9+/]{32}$/),
    url: 'https://hooks.example.test/tes',
    events: ['execution.succeeded', 'execution.failed'],
  });
  const all = await cli('webhook', 'create', '--project', p.projectId, '--url', 'http://127.0.0.1:9/all');
  expect(all.json().events).toEqual(['execution.succeeded', 'execution.failed', 'execution.cancelled', 'execution.needs_review']);

  const listed = await cli('webhook', 'list', '--project', p.projectId, '--json');
  expect(listed.code).toBe(0);
  expect(listed.out).not.toContain('whsec_');
  expect((listed.json().data as { id: string }[]).map((x) => x.id)).toEqual([e.id, all.json().id].sort());

  const deleted = await cli('webhook', 'delete', '--id', e.id as string);
  expect(deleted.json()).toEqual({ id: e.id, deleted: true });
  expect((await cli('webhook', 'delete', '--id', e.id as string)).code).toBe(1);
  expect(((await cli('webhook', 'list', '--project', p.projectId, '--json')).json().data as unknown[]).length).toBe(1);
  const shown = await cli('webhook', 'list', '--project', p.projectId);
  expect(shown.out).toMatch(
    new RegExp(
      `^ID\\s+URL\\s+EVENTS\\s+CREATED\\n${all.json().id as string}\\s+http://127.0.0.1:9/all\\s+execution.succeeded,execution.failed,execution.cancelled,execution.needs_review\\s+\\S+Z$`,
    ),
  );
  expect(shown.out).not.toContain('whsec_');
});

it('refuses bad input with exit 2, unknown ids with exit 1, and changes nothing', async () => {
  const p = await seedProject(db);
  const before = Number((await db('webhook_endpoints').count<{ n: string }[]>({ n: '*' }))[0]!.n);
  for (const argv of [
    ['webhook', 'create', '--project', p.projectId],
    ['webhook', 'create', '--project', p.projectId, '--url', 'ftp://x.test/'],
    ['webhook', 'create', '--project', p.projectId, '--url', 'https://user:pw@x.test/'],
    ['webhook', 'create', '--project', p.projectId, '--url', 'https://x.test/', '--events', 'execution.started'],
    ['webhook', 'delete', '--id', 'nope'],
    ['webhook', 'list', '--project', 'web'],
  ]) {
    const r = await cli(...argv);
    expect({ argv, code: r.code }).toEqual({ argv, code: 2 });
    expect(() => JSON.parse(r.err) as unknown).not.toThrow();
  }
  for (const argv of [
    ['webhook', 'create', '--project', 'prj_01ARZ3NDEKTSV4RRFFQ69G5FAV', '--url', 'https://x.test/'],
    ['webhook', 'list', '--project', 'prj_01ARZ3NDEKTSV4RRFFQ69G5FAV'],
    ['webhook', 'deliveries', '--execution', 'exe_01ARZ3NDEKTSV4RRFFQ69G5FAV'],
    ['webhook', 'delete', '--id', 'whk_01ARZ3NDEKTSV4RRFFQ69G5FAV'],
  ]) {
    const r = await cli(...argv);
    expect({ argv, code: r.code }).toEqual({ argv, code: 1 });
    expect((JSON.parse(r.err) as { error: string }).error).toMatch(/not found/);
  }
  expect(Number((await db('webhook_endpoints').count<{ n: string }[]>({ n: '*' }))[0]!.n)).toBe(before);
});
