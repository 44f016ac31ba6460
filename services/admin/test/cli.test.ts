import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createHash } from 'node:crypto';
import type { Knex } from 'knex';
import { checkPriceList, DEFAULT_PRICE_LIST } from '@tes/catalog';
import { isId, newId } from '@tes/core';
import { createDb } from '@tes/db';
import { createTestDatabase, type TestDatabase } from '@tes/testing';
import { runCli } from '../src/cli';
import { COMMANDS } from '../src/commands';

const SECRET = /^tes_[0-9A-Za-z]{8}_[0-9A-Za-z]{32}$/;

let tdb: TestDatabase;
let db: Knex;
let dir: string;

beforeAll(async () => {
  tdb = await createTestDatabase();
  db = createDb({ url: tdb.url, poolMax: 2 });
  dir = await mkdtemp(path.join(os.tmpdir(), 'tes-admin-test-'));
});

afterAll(async () => {
  await db?.destroy();
  await tdb?.drop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** Runs the CLI in-process, as `npm run admin -- ...argv` would, against the test database. */
async function cli(...argv: string[]) {
  const out: string[] = [];
  const err: string[] = [];
  let connects = 0;
  const connect = () => {
    connects++;
    return createDb({ url: tdb.url, poolMax: 1 });
  };
  const code = await runCli(argv, connect, { out: (t) => out.push(t), err: (t) => err.push(t) });
  return { code, out: out.join('\n'), err: err.join('\n'), connects, json: () => JSON.parse(out.join('\n')) };
}

const count = async (table: string) => Number((await db(table).count<{ n: string }[]>({ n: '*' }))[0]?.n);

async function jsonFile(name: string, value: unknown): Promise<string> {
  const file = path.join(dir, name);
  await writeFile(file, typeof value === 'string' ? value : JSON.stringify(value));
  return file;
}

describe('usage', () => {
  it('general --help lists every command and exits 0; no arguments prints it and exits 2', async () => {
    const help = await cli('--help');
    expect(help.code).toBe(0);
    for (const c of COMMANDS) expect(help.out).toContain(c.name);
    const none = await cli();
    expect(none.code).toBe(2);
    expect(none.out).toBe(help.out);
    expect(help.connects + none.connects).toBe(0);
  });

  it.each(COMMANDS.map((c) => [c.name, c] as const))('%s --help describes the command and its options', async (name, c) => {
    const r = await cli(...name.split(' '), '--help');
    expect(r.code).toBe(0);
    expect(r.out).toContain(`usage: admin ${name}`);
    expect(r.out).toContain(c.summary);
    for (const option of Object.keys(c.options)) expect(r.out).toContain(`--${option}`);
    expect(r.connects).toBe(0);
  });

  it.each([['org', 'destroy'], ['frobnicate'], ['execution'], ['ORG', 'create']])('unknown command %s exits 2', async (...argv) => {
    const r = await cli(...argv, '--name', 'x');
    expect(r.code).toBe(2);
    expect(JSON.parse(r.err).error).toMatch(/unknown command/);
    expect(r.connects).toBe(0);
  });

  it.each([
    ['org create'],
    ['org create --name'],
    ['project create --name Web'],
    ['key create --project prj_x --name k'],
    ['balance credit --project prj_x'],
    ['org create --name a --bogus b'],
    ['org create --name a stray'],
  ])('%s exits 2 and writes nothing', async (line) => {
    const before = await Promise.all(['organizations', 'projects', 'api_keys', 'ledger_entries'].map(count));
    const r = await cli(...line.split(' '));
    expect(r.code).toBe(2);
    expect(r.out).toBe('');
    expect(JSON.parse(r.err).error).toEqual(expect.any(String));
    expect(r.connects).toBe(0);
    expect(await Promise.all(['organizations', 'projects', 'api_keys', 'ledger_entries'].map(count))).toEqual(before);
  });
});

describe('operator flow', () => {
  let orgId: string;
  let projectId: string;
  let keyId: string;

  it('org create -> { id }', async () => {
    const r = await cli('org', 'create', '--name', 'Acme');
    expect(r.code).toBe(0);
    orgId = r.json().id;
    expect(isId('org', orgId)).toBe(true);
    expect(await db('organizations').where({ id: orgId }).first()).toMatchObject({ name: 'Acme' });
  });

  it('project create with a monthly cap; a bad cap exits 2', async () => {
    const bad = await cli('project', 'create', '--org', orgId, '--name', 'Web', '--monthly-cap-micros', '1.5');
    expect(bad.code).toBe(2);
    expect(await count('projects')).toBe(0);
    const r = await cli('project', 'create', '--org', orgId, '--name', 'Web', '--monthly-cap-micros', '50000000');
    expect(r.code).toBe(0);
    projectId = r.json().id;
    expect(isId('prj', projectId)).toBe(true);
    const row = await db('projects').where({ id: projectId }).first();
    expect(row).toMatchObject({ organization_id: orgId, name: 'Web', monthly_cap_micros: 50_000_000, available_micros: 0 });
  });

  it('key create validates scopes and role and writes nothing when they are wrong', async () => {
    for (const args of [
      ['--scopes', 'tools:read,tools:destroy'],
      ['--scopes', ','],
      ['--scopes', 'tools:read', '--role', 'OWNER'],
      ['--scopes', 'tools:read', '--expires-at', 'soon'],
    ]) {
      const r = await cli('key', 'create', '--project', projectId, '--name', 'ci', ...args);
      expect(r.code).toBe(2);
      expect(r.out).toBe('');
    }
    expect(await count('api_keys')).toBe(0);
  });

  it('key create prints the secret once and stores only its digest', async () => {
    const r = await cli('key', 'create', '--project', projectId, '--name', 'ci', '--scopes', 'tools:read, tools:execute', '--role', 'ADMIN');
    expect(r.code).toBe(0);
    const { id, secret } = r.json() as { id: string; secret: string };
    keyId = id;
    expect(isId('key', id)).toBe(true);
    expect(secret).toMatch(SECRET);
    expect(r.out.split(secret)).toHaveLength(2);
    const row = await db('api_keys').where({ id }).first();
    expect(row).toMatchObject({ project_id: projectId, name: 'ci', role: 'ADMIN', scopes: ['tools:read', 'tools:execute'], revoked_at: null });
    expect(row.lookup_id).toBe(secret.slice(4, 12));
    expect(Buffer.from(row.digest).equals(createHash('sha256').update(secret).digest())).toBe(true);
    // no column of any key row holds the secret or its random part, in any textual form
    const rows = (await db.raw('SELECT k::text AS t, row_to_json(k)::text AS j FROM api_keys k')).rows as { t: string; j: string }[];
    expect(rows).toHaveLength(1);
    for (const { t, j } of rows) for (const needle of [secret, secret.slice(13)]) expect(`${t}\n${j}`).not.toContain(needle);
  });

  it('balance credit accepts only positive whole micros', async () => {
    for (const micros of ['0', '1.5', '-5', 'abc', '1e6']) {
      const r = await cli('balance', 'credit', '--project', projectId, `--micros=${micros}`);
      expect(r.code).toBe(2);
    }
    expect(await count('ledger_entries')).toBe(0);
    expect((await cli('balance', 'credit', '--project', projectId, '--micros', '2500000', '--reference', 'inv-1')).json()).toEqual({
      availableMicros: 2_500_000,
    });
    expect((await cli('balance', 'credit', '--project', projectId, '--micros', '500000')).json()).toEqual({ availableMicros: 3_000_000 });
    // A retried credit with the same reference is a no-op; the same reference with another amount is refused.
    expect((await cli('balance', 'credit', '--project', projectId, '--micros', '2500000', '--reference', 'inv-1')).json()).toEqual({
      availableMicros: 3_000_000,
      replayed: true,
    });
    const clash = await cli('balance', 'credit', '--project', projectId, '--micros', '7', '--reference', 'inv-1');
    expect(clash.code).toBe(1);
    expect(JSON.parse(clash.err).error).toMatch(/already used/);
    expect((await cli('balance', 'credit', '--project', projectId, '--micros', '1', '--reference', 'inv-2')).json()).toEqual({ availableMicros: 3_000_001 });
    expect((await db('projects').where({ id: projectId }).first()).available_micros).toBe(3_000_001);
    const credit = await db('ledger_entries').where({ project_id: projectId, reference: 'inv-1' }).orderBy('account');
    expect(credit.map((e) => [e.account, e.amount_micros])).toEqual([
      ['available', 2_500_000],
      ['funding', -2_500_000],
    ]);
  });

  it('cap set takes a number or none', async () => {
    const capOf = async () => (await db('projects').where({ id: projectId }).first()).monthly_cap_micros;
    expect((await cli('cap', 'set', '--project', projectId, '--micros', '7000000')).json()).toEqual({ monthlyCapMicros: 7_000_000 });
    expect(await capOf()).toBe(7_000_000);
    expect((await cli('cap', 'set', '--project', projectId, '--micros', 'none')).json()).toEqual({ monthlyCapMicros: null });
    expect(await capOf()).toBeNull();
    expect((await cli('cap', 'set', '--project', projectId, '--micros', 'lots')).code).toBe(2);
    expect(await capOf()).toBeNull();
  });

  it('key revoke sets revokedAt; an unknown key exits 1, a malformed one 2', async () => {
    const r = await cli('key', 'revoke', '--key', keyId);
    expect(r.code).toBe(0);
    expect(r.json()).toEqual({ id: keyId, revokedAt: expect.any(String) });
    expect((await db('api_keys').where({ id: keyId }).first()).revoked_at).not.toBeNull();
    expect((await cli('key', 'revoke', '--key', newId('key'))).code).toBe(1);
    expect((await cli('key', 'revoke', '--key', 'sk_live_x')).code).toBe(2);
  });

  it('execution-enabled set false/true; anything else exits 2', async () => {
    const setting = async () => (await db('settings').where({ key: 'execution_enabled' }).first()).value;
    expect((await cli('execution-enabled', 'set', 'false')).json()).toEqual({ executionEnabled: false });
    expect(await setting()).toBe(false);
    expect((await cli('execution-enabled', 'set', 'maybe')).code).toBe(2);
    expect((await cli('execution-enabled', 'set')).code).toBe(2);
    expect(await setting()).toBe(false);
    expect((await cli('execution-enabled', 'set', 'true')).json()).toEqual({ executionEnabled: true });
    expect(await setting()).toBe(true);
  });

  it('prices export prints a list that checkPriceList accepts', async () => {
    const r = await cli('prices', 'export');
    expect(r.code).toBe(0);
    expect(checkPriceList(r.json())).toEqual([]);
    expect(r.json()).toEqual(DEFAULT_PRICE_LIST);
  });

  it('prices publish: same content keeps the version, changed content gets a new one, invalid files exit 2', async () => {
    const exported = (await cli('prices', 'export')).json();
    const first = (await cli('prices', 'publish', '--file', await jsonFile('a.json', exported))).json().priceVersion as string;
    expect(first).toMatch(/^\d{4}-\d{2}-\d{2}\.\d+$/);
    // same content with keys in another order is the same list
    const reordered = { tools: Object.fromEntries(Object.entries(exported.tools).reverse()), currency: 'usd' };
    expect((await cli('prices', 'publish', '--file', await jsonFile('b.json', reordered))).json()).toEqual({ priceVersion: first, created: false });

    const changed = structuredClone(exported);
    changed.tools['image.render'].models.sharp.unitPriceMicros = 2_000;
    const second = (await cli('prices', 'publish', '--file', await jsonFile('c.json', changed))).json().priceVersion;
    expect(second).not.toBe(first);
    expect((await cli('prices', 'export')).json()).toEqual(changed);

    const versions = await count('price_versions');
    for (const file of [
      await jsonFile('eur.json', { ...exported, currency: 'eur' }),
      await jsonFile('neg.json', { currency: 'usd', tools: { t: { models: { m: { unitPriceMicros: -1, minimumMicros: 0 } } } } }),
      await jsonFile('broken.json', '{ "currency": '),
      path.join(dir, 'missing.json'),
    ]) {
      const r = await cli('prices', 'publish', '--file', file);
      expect(r.code).toBe(2);
      expect(r.out).toBe('');
    }
    expect(await count('price_versions')).toBe(versions);
  });

  it('prices export names the version to expect; publish --expect-version is a compare-and-set', async () => {
    const exported = await cli('prices', 'export');
    const current = (await db('price_versions').orderBy('seq', 'desc').first()).version as string;
    expect(exported.err).toBe(`note: current priceVersion ${current}: after editing, publish with --expect-version ${current}`);
    const mine = exported.json();
    mine.tools['image.render'].models.sharp.unitPriceMicros = 3_000;
    const myFile = await jsonFile('mine.json', mine);

    // a colleague publishes meanwhile
    const theirs = structuredClone(exported.json());
    theirs.tools['image.render'].models.sharp.minimumMicros = 7;
    const colleague = await cli('prices', 'publish', '--file', await jsonFile('theirs.json', theirs), '--expect-version', current);
    expect(colleague.code).toBe(0);
    const theirVersion = colleague.json().priceVersion as string;
    expect(theirVersion).not.toBe(current);

    const versions = await count('price_versions');
    const stale = await cli('prices', 'publish', '--file', myFile, '--expect-version', current);
    expect(stale.code).toBe(1);
    expect(stale.out).toBe('');
    expect(JSON.parse(stale.err).error).toBe(
      `the current price version is ${theirVersion}, not ${current}: someone published since your export; nothing was published. ` +
        `Export again, re-apply your edit, and publish with --expect-version ${theirVersion}`,
    );
    expect(await count('price_versions')).toBe(versions);
    expect((await cli('prices', 'export')).json()).toEqual(theirs);
    expect((await cli('prices', 'publish', '--file', myFile, '--expect-version', 'none')).code).toBe(1);
    expect((await cli('prices', 'publish', '--file', myFile, '--expect-version', 'latest')).code).toBe(2);
    expect(await count('price_versions')).toBe(versions);

    const fresh = await cli('prices', 'publish', '--file', myFile, '--expect-version', theirVersion);
    expect(fresh.code).toBe(0);
    expect(fresh.err).toBe('');
    expect(fresh.json()).toEqual({ priceVersion: expect.not.stringMatching(theirVersion), created: true });
    // without --expect-version it still publishes, and says what that risks
    const blind = await cli('prices', 'publish', '--file', await jsonFile('blind.json', theirs));
    expect(blind.code).toBe(0);
    expect(blind.err).toMatch(/^note: published without --expect-version/);
  });

  it('ledger audit is ok after credits', async () => {
    const r = await cli('ledger', 'audit');
    expect(r.code).toBe(0);
    expect(r.json()).toMatchObject({ ok: true, problems: [], totals: { creditedMicros: 3_000_001, availableMicros: 3_000_001 } });
    // progress goes to stderr, the report alone to stdout
    expect(r.err).toMatch(/^note: ledger audit: done: \d+ journal entries, 0 executions, \d+ projects, 0 problems$/m);
  });

  it('dev seed prints an org, a funded project and an all-scopes ADMIN key', async () => {
    const r = await cli('dev', 'seed');
    expect(r.code).toBe(0);
    const seeded = r.json();
    expect(isId('org', seeded.organizationId) && isId('prj', seeded.projectId) && isId('key', seeded.keyId)).toBe(true);
    expect(seeded.secret).toMatch(SECRET);
    expect(seeded.availableMicros).toBe(100_000_000);
    const key = await db('api_keys').where({ id: seeded.keyId }).first();
    expect(key).toMatchObject({ project_id: seeded.projectId, role: 'ADMIN' });
    expect(key.scopes).toHaveLength(5);
    expect((await cli('ledger', 'audit')).code).toBe(0);
  });

  it('ledger audit exits 1 when a balance no longer matches the journal', async () => {
    await db.raw('UPDATE projects SET available_micros = available_micros + 1 WHERE id = ?', [projectId]);
    const r = await cli('ledger', 'audit');
    expect(r.code).toBe(1);
    const report = r.json();
    expect(report.ok).toBe(false);
    expect(report.problems).toContainEqual(expect.objectContaining({ check: 'available_matches_journal', projectId }));
    // only the tampered project is reported
    expect(report.problems.every((p: { projectId?: string }) => p.projectId === projectId)).toBe(true);
  });

  it('execution resolve refuses an unknown execution with exit 1, a bad status with exit 2', async () => {
    const missing = await cli('execution', 'resolve', '--execution', newId('exe'), '--status', 'failed', '--charge-micros', '0');
    expect(missing.code).toBe(1);
    expect(JSON.parse(missing.err).error).toMatch(/not found/);
    expect((await cli('execution', 'resolve', '--execution', newId('exe'), '--status', 'done', '--charge-micros', '0')).code).toBe(2);
  });

  it('an unknown organization or project is a failed precondition (exit 1); a malformed id is bad usage (exit 2)', async () => {
    const cases = [
      ['project', 'create', '--org', newId('org'), '--name', 'x'],
      ['key', 'create', '--project', newId('prj'), '--name', 'x', '--scopes', 'tools:read'],
      ['balance', 'credit', '--project', newId('prj'), '--micros', '5'],
      ['cap', 'set', '--project', newId('prj'), '--micros', '5'],
    ];
    for (const argv of cases) {
      const r = await cli(...argv);
      expect(r.code).toBe(1);
      expect(r.out).toBe('');
      expect(JSON.parse(r.err).error).toMatch(/not found/);
      const malformed = await cli(...argv.map((a) => (a.startsWith('org_') || a.startsWith('prj_') ? 'acme' : a)));
      expect(malformed.code).toBe(2);
      expect(JSON.parse(malformed.err).error).toMatch(/must be an id/);
    }
  });
});
