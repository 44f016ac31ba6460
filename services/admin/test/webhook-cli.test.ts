import { createDb } from '@tes/db';
import { seedProject, useTestDatabase } from '@tes/testing';
import { runCli } from '../src/cli';

const { db, database: tdb } = useTestDatabase({ poolMax: 2 });

async function cli(...argv: string[]) {
  return cliWith({ webhookAllowPrivate: false }, ...argv);
}

/** As main.ts runs it, with WEBHOOK_ALLOW_PRIVATE as given. */
async function cliWith(settings: { webhookAllowPrivate: boolean }, ...argv: string[]) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await runCli(argv, () => createDb({ url: tdb.url, poolMax: 1 }), { out: (t) => out.push(t), err: (t) => err.push(t), tty: true }, settings);
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
  const all = await cliWith({ webhookAllowPrivate: true }, 'webhook', 'create', '--project', p.projectId, '--url', 'http://127.0.0.1:9/all');
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

it('refuses loopback and private endpoints at creation, by the rule deliveries use, unless WEBHOOK_ALLOW_PRIVATE (issue #26)', async () => {
  const p = await seedProject(db);
  const count = async () => Number((await db('webhook_endpoints').where({ project_id: p.projectId }).count<{ n: string }[]>({ n: '*' }))[0]!.n);
  for (const url of [
    'http://127.0.0.1:9/hook',
    'http://localhost:9/hook',
    'http://[::1]/hook',
    'http://[::7f00:1]/hook',
    'https://10.0.0.7/hook',
    'https://169.254.169.254/latest/meta-data/',
    'https://[fd00::1]/hook',
    'https://[::ffff:192.168.1.1]/hook',
  ]) {
    const r = await cli('webhook', 'create', '--project', p.projectId, '--url', url);
    expect({ url, code: r.code }).toEqual({ url, code: 2 });
    expect((JSON.parse(r.err) as { error: string }).error).toMatch(/webhooks are delivered to public addresses only/);
  }
  expect(await count()).toBe(0);
  // a public address, and a name that does not resolve now (every delivery checks again)
  expect((await cli('webhook', 'create', '--project', p.projectId, '--url', 'https://93.184.215.14/hook')).code).toBe(0);
  expect((await cli('webhook', 'create', '--project', p.projectId, '--url', 'https://hooks.example.test/hook')).code).toBe(0);
  // development: allowed when the relay would deliver there too
  expect((await cliWith({ webhookAllowPrivate: true }, 'webhook', 'create', '--project', p.projectId, '--url', 'http://localhost:9/hook')).code).toBe(0);
  expect(await count()).toBe(3);
});
