import { digestSecret, newId, SCOPES } from '@tes/core';
import {
  auditLedger,
  claimExecution,
  createDb,
  createWebhookEndpoint,
  finishStep,
  markNeedsReview,
  publishPrices,
  revokeApiKey,
  settleExecution,
  startStep,
  submitExecution,
} from '@tes/db';
import { addKey, seedProject, useTestDatabase, type SeededProject } from '@tes/testing';
import { runCli } from '../src/cli';
import { exportLedger } from '../src/ledger-export';

/**
 * The read side of the admin CLI against a real database: executions made by the same library
 * calls the gateway and the worker make (submit, claim, steps, settle, needs_review), webhook
 * deliveries written by the database's own trigger, and a journal month written at known times.
 */
const { db, database } = useTestDatabase({ poolMax: 2 });

/** `tty`: stdout is a terminal (tables by default), as for an operator; a script's stdout is not. */
async function cli(...argv: string[]) {
  return cliOn(true, ...argv);
}

async function cliOn(tty: boolean, ...argv: string[]) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await runCli(argv, () => createDb({ url: database.url, poolMax: 1 }), { out: (t) => out.push(t), err: (t) => err.push(t), tty });
  const text = out.join('\n');
  return { code, out: text, err: err.join('\n'), json: () => JSON.parse(text) };
}

let priceVersion: string;

async function submit(p: SeededProject, tool: string, reservedMicros: number, keyId = p.keyId): Promise<string> {
  const id = newId('exe');
  await submitExecution(db, {
    id,
    projectId: p.projectId,
    apiKeyId: keyId,
    tool,
    model: 'm1',
    category: 'test',
    arguments: { text: 'hello' },
    priceVersion,
    totalSteps: 1,
    reservedMicros,
    idempotencyKey: `k-${id}`,
    requestDigest: 'digest',
    dispatchDeadlineMs: 60_000,
  });
  return id;
}

/** Claim, one step ending `status`, settle with `charge`: the worker's path. */
async function run(p: SeededProject, id: string, status: 'succeeded' | 'failed', charge: number): Promise<void> {
  expect(await claimExecution(db, id, 'w1', 30_000)).not.toBeNull();
  expect(await startStep(db, { executionId: id, projectId: p.projectId, index: 0, name: 'render', owner: 'w1:1' })).toBe('started');
  const errorCode = status === 'failed' ? 'invalid_input_file' : null;
  expect(await finishStep(db, { executionId: id, projectId: p.projectId, index: 0, owner: 'w1:1', status, costMicros: charge, errorCode })).toBe(true);
  const settled = await settleExecution(db, {
    executionId: id,
    projectId: p.projectId,
    status,
    chargedMicros: charge,
    from: ['running'],
    leaseOwner: 'w1:1',
    output: status === 'succeeded' ? { ok: true } : null,
    errorCode,
    errorMessage: status === 'failed' ? 'not an image' : null,
  });
  expect(settled).not.toBeNull();
}

async function needsReview(p: SeededProject, id: string): Promise<void> {
  expect(await claimExecution(db, id, 'w1', 30_000)).not.toBeNull();
  expect(await markNeedsReview(db, { executionId: id, owner: 'w1:1', errorCode: 'provider_timeout', errorMessage: 'the provider did not answer' })).toBe(true);
}

let a: SeededProject;
let b: SeededProject;
let secondKey: { id: string; secret: string };
let webhookSecret: string;
const ids: Record<'ok' | 'failed' | 'review' | 'queued' | 'other' | 'reviewB', string> = { ok: '', failed: '', review: '', queued: '', other: '', reviewB: '' };

beforeAll(async () => {
  ({ priceVersion } = await publishPrices(db, { admin: 'read' }));
  a = await seedProject(db, { creditMicros: 10_000_000, monthlyCapMicros: 50_000_000 });
  b = await seedProject(db, { creditMicros: 1_000_000 });
  secondKey = await addKey(db, a.projectId, { name: 'ci', scopes: ['tools:read'], role: 'MEMBER' });
  webhookSecret = (await createWebhookEndpoint(db, { projectId: a.projectId, url: 'https://hooks.example.test/tes' })).secret;
  ids.ok = await submit(a, 'image.render', 100);
  await run(a, ids.ok, 'succeeded', 40);
  ids.failed = await submit(a, 'speech.synthesize', 300);
  await run(a, ids.failed, 'failed', 0);
  ids.review = await submit(a, 'image.render', 200);
  await needsReview(a, ids.review);
  ids.other = await submit(a, 'image.render', 50, secondKey.id);
  ids.queued = await submit(a, 'text.summarize', 70);
  ids.reviewB = await submit(b, 'image.render', 10);
  await needsReview(b, ids.reviewB);
  await revokeApiKey(db, secondKey.id);
});

/** Every read command's output, for the "no secret anywhere" check at the end. */
const outputs: string[] = [];
async function read(...argv: string[]) {
  const r = await cli(...argv);
  outputs.push(r.out, r.err);
  return r;
}

describe('org and project', () => {
  it('org list: a table by default, the same data with --json', async () => {
    const t = await read('org', 'list');
    expect(t.code).toBe(0);
    const lines = t.out.split('\n');
    expect(lines[0]).toMatch(/^ID\s+NAME\s+PROJECTS\s+CREATED$/);
    expect(lines.filter((l) => l.startsWith(a.organizationId) || l.startsWith(b.organizationId))).toHaveLength(2);
    const j = await read('org', 'list', '--json');
    expect((j.json() as { data: unknown[] }).data).toEqual(
      expect.arrayContaining([{ id: a.organizationId, name: 'Test org', projects: 1, createdAt: expect.stringMatching(/Z$/) }]),
    );
  });

  it('a script (stdout not a terminal) gets JSON, as the contract says; --table asks for the table', async () => {
    const piped = await cliOn(false, 'org', 'list');
    expect(piped.code).toBe(0);
    expect((piped.json() as { data: { id: string }[] }).data.map((o) => o.id)).toEqual(expect.arrayContaining([a.organizationId]));
    const table = await cliOn(false, 'org', 'list', '--table');
    expect(table.out.split('\n')[0]).toMatch(/^ID\s+NAME\s+PROJECTS\s+CREATED$/);
  });

  it('project list shows money in micros and dollars; --org narrows it; an unknown org exits 1, a malformed one 2', async () => {
    const t = await read('project', 'list');
    expect(t.code).toBe(0);
    const row = t.out.split('\n').find((l) => l.startsWith(a.projectId))!;
    // 10 USD credited, 100 + 300 + 200 + 50 + 70 reserved, 40 + 0 settled: available = 10e6 - 40 - 200 - 50 - 70
    expect(row).toContain('9999640 ($9.999640)');
    expect(row).toContain('320 ($0.000320)');
    expect(row).toContain('50000000 ($50.000000)');
    const only = (await read('project', 'list', '--org', b.organizationId, '--json')).json() as { data: { id: string }[] };
    expect(only.data.map((p) => p.id)).toEqual([b.projectId]);
    expect((await read('project', 'list', '--org', newId('org'))).code).toBe(1);
    expect((await read('project', 'list', '--org', 'acme')).code).toBe(2);
  });

  it('project show: balances, cap, keys, endpoints, open and needs_review counts', async () => {
    const r = await read('project', 'show', '--project', a.projectId, '--json');
    expect(r.code).toBe(0);
    expect(r.json()).toEqual({
      id: a.projectId,
      organizationId: a.organizationId,
      organizationName: 'Test org',
      name: 'Test project',
      availableMicros: 9_999_640,
      reservedMicros: 320,
      monthlyCapMicros: 50_000_000,
      monthChargedMicros: 40,
      createdAt: expect.any(String),
      activeKeys: 1,
      revokedOrExpiredKeys: 1,
      webhookEndpoints: 1,
      openExecutions: 2,
      needsReview: 1,
      month: { requests: 0, executions: 2, chargedMicros: 40 },
    });
    const t = await read('project', 'show', '--project', a.projectId);
    expect(t.out).toMatch(/^needs review\s+1$/m);
    expect(t.out).toMatch(/^keys\s+1 active, 1 revoked or expired$/m);
    expect((await read('project', 'show', '--project', newId('prj'))).code).toBe(1);
    expect((await read('project', 'show')).code).toBe(2);
  });
});

describe('keys and balances', () => {
  it('key list: prefix, scopes, state and last execution, never the secret or its digest', async () => {
    const r = await read('key', 'list', '--project', a.projectId, '--json');
    expect(r.code).toBe(0);
    const created = (await db('executions').where({ id: ids.queued }).first<{ created_at: Date }>('created_at')).created_at;
    const other = (await db('executions').where({ id: ids.other }).first<{ created_at: Date }>('created_at')).created_at;
    expect((r.json() as { data: unknown[] }).data).toEqual([
      {
        id: a.keyId,
        name: 'test key',
        prefix: a.secret.slice(0, 13),
        scopes: [...SCOPES],
        role: 'ADMIN',
        state: 'active',
        createdAt: expect.any(String),
        expiresAt: null,
        revokedAt: null,
        lastExecutionAt: created.toISOString(),
      },
      {
        id: secondKey.id,
        name: 'ci',
        prefix: secondKey.secret.slice(0, 13),
        scopes: ['tools:read'],
        role: 'MEMBER',
        state: 'revoked',
        createdAt: expect.any(String),
        expiresAt: null,
        revokedAt: expect.any(String),
        lastExecutionAt: other.toISOString(),
      },
    ]);
    const t = await read('key', 'list', '--project', a.projectId);
    expect(t.out.split('\n')[0]).toMatch(/^ID\s+NAME\s+PREFIX\s+ROLE\s+SCOPES\s+STATE\s+CREATED\s+EXPIRES\s+REVOKED\s+LAST EXECUTION$/);
    expect(t.out).toMatch(new RegExp(`^${secondKey.id}\\s+ci\\s+${secondKey.secret.slice(0, 13)}\\s+MEMBER\\s+tools:read\\s+revoked\\s`, 'm'));
    expect((await read('key', 'list', '--project', newId('prj'))).code).toBe(1);
  });

  it('balance show: the row, the journal totals and the cap, exactly', async () => {
    const r = await read('balance', 'show', '--project', a.projectId, '--json');
    expect(r.code).toBe(0);
    expect(r.json()).toEqual({
      projectId: a.projectId,
      availableMicros: 9_999_640,
      reservedMicros: 320,
      creditedMicros: 10_000_000,
      chargedMicros: 40,
      monthlyCapMicros: 50_000_000,
      monthChargedMicros: 40,
      capRemainingMicros: 50_000_000 - 40 - 320,
      journalAgrees: true,
    });
    const t = await read('balance', 'show', '--project', a.projectId);
    expect(t.out).toMatch(/^credited in all\s+10000000 \(\$10\.000000\)$/m);
    expect(t.out).toMatch(/^cap remaining\s+49999640 \(\$49\.999640\)$/m);
    expect(t.out).toMatch(/^journal agrees\s+yes$/m);
    expect((await read('balance', 'show', '--project', newId('prj'))).code).toBe(1);
  });
});

describe('execution list', () => {
  const listed = async (...argv: string[]) => {
    const r = await read('execution', 'list', ...argv, '--json');
    expect(r.code).toBe(0);
    return r.json() as { data: { id: string }[]; hasMore: boolean; nextBefore: string | null };
  };

  it('which executions need review? --status needs_review without --project answers across projects', async () => {
    expect((await listed('--status', 'needs_review')).data.map((e) => e.id)).toEqual([ids.reviewB, ids.review]);
    const t = await read('execution', 'list', '--status', 'needs_review');
    expect(t.out.split('\n')).toHaveLength(3);
    expect(t.out).toMatch(
      new RegExp(
        `^${ids.review}\\s+${a.projectId}\\s+image.render/m1\\s+needs_review\\s+200 \\(\\$0.000200\\)\\s+0 \\(\\$0.000000\\)\\s+provider_timeout\\s`,
        'm',
      ),
    );
  });

  it('filters by project, status, tool, key and age, newest first', async () => {
    expect((await listed('--project', a.projectId)).data.map((e) => e.id)).toEqual([ids.queued, ids.other, ids.review, ids.failed, ids.ok]);
    expect((await listed('--project', a.projectId, '--status', 'failed')).data).toEqual([
      {
        id: ids.failed,
        projectId: a.projectId,
        apiKeyId: a.keyId,
        tool: 'speech.synthesize',
        model: 'm1',
        status: 'failed',
        reservedMicros: 300,
        chargedMicros: 0,
        errorCode: 'invalid_input_file',
        createdAt: expect.any(String),
        finishedAt: expect.any(String),
      },
    ]);
    expect((await listed('--project', a.projectId, '--tool', 'image.render')).data.map((e) => e.id)).toEqual([ids.other, ids.review, ids.ok]);
    expect((await listed('--tool', 'image.render', '--status', 'needs_review')).data.map((e) => e.id)).toEqual([ids.reviewB, ids.review]);
    expect((await listed('--key', secondKey.id)).data.map((e) => e.id)).toEqual([ids.other]);
    expect((await listed('--project', a.projectId, '--since', '1h')).data).toHaveLength(5);
    expect((await listed('--since', '2099-01-01T00:00:00Z')).data).toEqual([]);
    const t = await read('execution', 'list', '--since', '2099-01-01');
    expect(t.out).toBe('(no executions match)');
  });

  it('pages with --limit and --before', async () => {
    const first = await listed('--project', a.projectId, '--limit', '2');
    expect(first.data.map((e) => e.id)).toEqual([ids.queued, ids.other]);
    expect(first).toMatchObject({ hasMore: true, nextBefore: ids.other });
    const second = await listed('--project', a.projectId, '--limit', '2', '--before', first.nextBefore!);
    expect(second.data.map((e) => e.id)).toEqual([ids.review, ids.failed]);
    const last = await listed('--project', a.projectId, '--limit', '2', '--before', second.nextBefore!);
    expect(last).toEqual({ data: [expect.objectContaining({ id: ids.ok })], hasMore: false, nextBefore: null });
    const t = await read('execution', 'list', '--project', a.projectId, '--limit', '2');
    expect(t.out).toContain(`2 shown; older ones: --before ${ids.other}`);
  });

  it.each([
    [['--status', 'done'], 2],
    [['--limit', '0'], 2],
    [['--limit', '1001'], 2],
    [['--since', 'yesterday'], 2],
    [['--project', 'web'], 2],
    [['--key', 'key_1'], 2],
    [['--before', 'x'], 2],
    [['--project', 'prj_01ARZ3NDEKTSV4RRFFQ69G5FAV'], 1],
  ])('execution list %j exits %i', async (args, code) => {
    const r = await read('execution', 'list', ...args);
    expect(r.code).toBe(code);
    expect(r.out).toBe('');
    expect(JSON.parse(r.err)).toEqual(expect.objectContaining({ error: expect.any(String) }));
  });
});

describe('execution show', () => {
  it('the execution with its steps, journal entries and webhook deliveries', async () => {
    const r = await read('execution', 'show', ids.failed, '--json');
    expect(r.code).toBe(0);
    const shown = r.json() as {
      execution: Record<string, unknown>;
      steps: Record<string, unknown>[];
      journal: { kind: string; account: string; amountMicros: number; transactionId: string }[];
      webhookDeliveries: Record<string, unknown>[];
      artifacts: unknown[];
    };
    expect(shown.execution).toMatchObject({
      id: ids.failed,
      projectId: a.projectId,
      apiKeyId: a.keyId,
      apiKeyName: 'test key',
      status: 'failed',
      errorCode: 'invalid_input_file',
      errorMessage: 'not an image',
      reservedMicros: 300,
      chargedMicros: 0,
      arguments: { text: 'hello' },
    });
    expect(shown.execution).not.toHaveProperty('leaseOwner');
    expect(shown.steps).toEqual([expect.objectContaining({ index: 0, name: 'render', status: 'failed', costMicros: 0, errorCode: 'invalid_input_file' })]);
    expect(shown.journal.map((j) => [j.kind, j.account, j.amountMicros])).toEqual([
      ['reserve', 'available', -300],
      ['reserve', 'reserved', 300],
      ['settle', 'reserved', -300],
      ['settle', 'available', 300],
      ['settle', 'charged', 0],
    ]);
    expect(shown.webhookDeliveries).toEqual([expect.objectContaining({ eventType: 'execution.failed', status: 'pending', attempts: 0 })]);
    expect(shown.artifacts).toEqual([]);

    const t = await read('execution', 'show', ids.failed);
    expect(t.out).toMatch(/^status\s+failed$/m);
    expect(t.out).toMatch(/^error\s+invalid_input_file: not an image$/m);
    expect(t.out).toMatch(/^reserved\s+300 \(\$0\.000300\)$/m);
    expect(t.out).toMatch(/\nsteps\n#\s+NAME\s+STATUS\s+COST/);
    expect(t.out).toMatch(/^\s*\d+\s+\S+\s+settle\s+available\s+300 \(\$0\.000300\)\s/m);
    expect(t.out).toMatch(/\nwebhook deliveries\nID\s+ENDPOINT\s+EVENT\s+STATUS/);
    expect(t.out).toMatch(/\nartifacts\n {2}\(none\)$/);
    const d = await read('webhook', 'deliveries', '--execution', ids.failed);
    expect(d.out).toMatch(
      /^ID\s+ENDPOINT\s+EVENT\s+STATUS\s+ATTEMPTS\s+LAST CODE\s+NEXT ATTEMPT\s+LAST ERROR\nmsg_\w+\s+whk_\w+\s+execution.failed\s+pending\s+0\s+-\s+\S+Z\s+-$/,
    );
    expect((await read('webhook', 'deliveries', '--execution', ids.queued)).out).toMatch(/^\(no deliveries/);
  });

  it('a queued execution has no steps and no deliveries yet; unknown ids exit 1, malformed ones 2', async () => {
    const t = await read('execution', 'show', ids.queued);
    expect(t.code).toBe(0);
    expect(t.out).toMatch(/\nsteps\n {2}\(none\)\n/);
    expect(t.out).toMatch(/\nwebhook deliveries\n {2}\(none\)\n/);
    expect((await read('execution', 'show', newId('exe'))).code).toBe(1);
    expect((await read('execution', 'show', 'exe_nope')).code).toBe(2);
    expect((await read('execution', 'show')).code).toBe(2);
    expect((await read('execution', 'show', ids.ok, ids.failed)).code).toBe(2);
  });
});

describe('ledger export', () => {
  let c: SeededProject;
  let exe: string;
  let entryIds: number[];

  /** One balanced transaction at a known time (the journal takes inserts; only rewrites are refused). */
  async function post(at: string, kind: string, postings: [string, number][], executionId: string | null, reference: string | null = null) {
    const transactionId = `t-${at}-${kind}`;
    await db('ledger_entries').insert(
      postings.map(([account, amount]) => ({
        transaction_id: transactionId,
        project_id: c.projectId,
        execution_id: executionId,
        kind,
        account,
        amount_micros: amount,
        reference,
        created_at: at,
      })),
    );
  }

  beforeAll(async () => {
    c = await seedProject(db);
    // An execution of that month, as its submit and settlement left it (the journal below holds
    // its reservation and settlement), and the balance row the entries add up to: the audit in
    // afterAll holds for this project too.
    exe = newId('exe');
    await db('executions').insert({
      id: exe,
      project_id: c.projectId,
      api_key_id: c.keyId,
      tool: 'image.render',
      model: 'm1',
      category: 'image',
      status: 'succeeded',
      arguments: {},
      price_version: priceVersion,
      total_steps: 1,
      reserved_micros: 250_000,
      charged_micros: 200_000,
      idempotency_key: 'november',
      request_digest: 'd',
      created_at: '2025-11-02T10:00:00.123456Z',
      finished_at: '2025-11-02T10:00:05Z',
      settled_at: '2025-11-02T10:00:05Z',
    });
    await db('projects')
      .where({ id: c.projectId })
      .update({ available_micros: 5_000_000 + 1_500_000 - 250_000 + 50_000 + 1 });
    // October 2025: the opening balances of November
    await post(
      '2025-10-31T23:59:59.999999Z',
      'credit',
      [
        ['funding', -5_000_000],
        ['available', 5_000_000],
      ],
      null,
      'inv-9',
    );
    // November 2025
    await post(
      '2025-11-01T00:00:00Z',
      'credit',
      [
        ['funding', -1_500_000],
        ['available', 1_500_000],
      ],
      null,
      'inv "7", Nov',
    );
    await post(
      '2025-11-02T10:00:00.123456Z',
      'reserve',
      [
        ['available', -250_000],
        ['reserved', 250_000],
      ],
      exe,
    );
    await post(
      '2025-11-02T10:00:05Z',
      'settle',
      [
        ['reserved', -250_000],
        ['available', 50_000],
        ['charged', 200_000],
      ],
      exe,
    );
    // December 2025: not in November's export
    await post(
      '2025-12-01T00:00:00Z',
      'credit',
      [
        ['funding', -1],
        ['available', 1],
      ],
      null,
      'inv-10',
    );
    entryIds = (
      await db('ledger_entries')
        .where({ project_id: c.projectId })
        .where('created_at', '>=', '2025-11-01T00:00:00Z')
        .where('created_at', '<', '2025-12-01T00:00:00Z')
        .orderBy([{ column: 'created_at' }, { column: 'id' }])
        .select<{ id: number }[]>('id')
    ).map((r) => r.id);
    expect(entryIds).toHaveLength(7);
  });

  it('CSV: every column, quoted where needed, balances continuing from the month before', async () => {
    const r = await read('ledger', 'export', '--project', c.projectId, '--month', '2025-11');
    expect(r.code).toBe(0);
    const [e1, e2, e3, e4, e5, e6, e7] = entryIds;
    const p = c.projectId;
    expect(r.out).toBe(
      [
        'entry_id,transaction_id,created_at,project_id,execution_id,tool,model,kind,account,amount_micros,amount_usd,balance_after_micros,balance_after_usd,reference',
        `${e1},t-2025-11-01T00:00:00Z-credit,2025-11-01T00:00:00.000000Z,${p},,,,credit,funding,-1500000,-1.500000,-6500000,-6.500000,"inv ""7"", Nov"`,
        `${e2},t-2025-11-01T00:00:00Z-credit,2025-11-01T00:00:00.000000Z,${p},,,,credit,available,1500000,1.500000,6500000,6.500000,"inv ""7"", Nov"`,
        `${e3},t-2025-11-02T10:00:00.123456Z-reserve,2025-11-02T10:00:00.123456Z,${p},${exe},image.render,m1,reserve,available,-250000,-0.250000,6250000,6.250000,`,
        `${e4},t-2025-11-02T10:00:00.123456Z-reserve,2025-11-02T10:00:00.123456Z,${p},${exe},image.render,m1,reserve,reserved,250000,0.250000,250000,0.250000,`,
        `${e5},t-2025-11-02T10:00:05Z-settle,2025-11-02T10:00:05.000000Z,${p},${exe},image.render,m1,settle,reserved,-250000,-0.250000,0,0.000000,`,
        `${e6},t-2025-11-02T10:00:05Z-settle,2025-11-02T10:00:05.000000Z,${p},${exe},image.render,m1,settle,available,50000,0.050000,6300000,6.300000,`,
        `${e7},t-2025-11-02T10:00:05Z-settle,2025-11-02T10:00:05.000000Z,${p},${exe},image.render,m1,settle,charged,200000,0.200000,200000,0.200000,`,
      ].join('\n'),
    );
  });

  it('JSON lines: the same entries as objects', async () => {
    const r = await read('ledger', 'export', '--project', c.projectId, '--month', '2025-11', '--format', 'jsonl');
    expect(r.code).toBe(0);
    const lines = r.out.split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines).toHaveLength(7);
    expect(lines[0]).toEqual({
      entryId: entryIds[0],
      transactionId: 't-2025-11-01T00:00:00Z-credit',
      createdAt: '2025-11-01T00:00:00.000000Z',
      projectId: c.projectId,
      executionId: null,
      tool: null,
      model: null,
      kind: 'credit',
      account: 'funding',
      amountMicros: -1_500_000,
      amountUsd: '-1.500000',
      balanceAfterMicros: -6_500_000,
      balanceAfterUsd: '-6.500000',
      reference: 'inv "7", Nov',
    });
    expect(lines[6]).toMatchObject({ entryId: entryIds[6], executionId: exe, tool: 'image.render', account: 'charged', amountMicros: 200_000 });
    // what did the project spend in November? the charged account's postings
    expect(lines.filter((l) => l.account === 'charged').reduce((s, l) => s + (l.amountMicros as number), 0)).toBe(200_000);
  });

  it('streams in batches without losing or repeating an entry across a batch boundary', async () => {
    const chunks: string[] = [];
    for await (const chunk of exportLedger(db, {
      projectId: c.projectId,
      month: { start: new Date('2025-11-01T00:00:00Z'), end: new Date('2025-12-01T00:00:00Z') },
      format: 'jsonl',
      batchSize: 2,
    })) {
      chunks.push(chunk);
    }
    expect(chunks).toHaveLength(4);
    const lines = chunks.join('\n').split('\n');
    expect(lines.map((l) => (JSON.parse(l) as { entryId: number }).entryId)).toEqual(entryIds);
    expect(chunks.join('\n')).toBe((await read('ledger', 'export', '--project', c.projectId, '--month', '2025-11', '--format', 'jsonl')).out);
  });

  it('an empty month is the header alone (CSV) or nothing (JSON lines); bad input exits 2, an unknown project 1', async () => {
    expect((await read('ledger', 'export', '--project', c.projectId, '--month', '2024-01')).out).toBe(
      'entry_id,transaction_id,created_at,project_id,execution_id,tool,model,kind,account,amount_micros,amount_usd,balance_after_micros,balance_after_usd,reference',
    );
    expect((await read('ledger', 'export', '--project', c.projectId, '--month', '2024-01', '--format', 'jsonl')).out).toBe('');
    for (const month of ['2025-13', '2025-1', 'november', '2025-11-01']) {
      expect((await read('ledger', 'export', '--project', c.projectId, '--month', month)).code).toBe(2);
    }
    expect((await read('ledger', 'export', '--project', c.projectId, '--month', '2025-11', '--format', 'xlsx')).code).toBe(2);
    expect((await read('ledger', 'export', '--month', '2025-11')).code).toBe(2);
    const unknown = await read('ledger', 'export', '--project', newId('prj'), '--month', '2025-11');
    expect(unknown.code).toBe(1);
    expect(unknown.out).toBe('');
  });
});

it('no read command printed a key secret, its random part or digest, or a webhook signing secret', () => {
  const all = outputs.join('\n');
  expect(all.length).toBeGreaterThan(5_000);
  for (const secret of [a.secret, b.secret, secondKey.secret]) {
    for (const needle of [secret, secret.slice(13), digestSecret(secret).toString('hex'), digestSecret(secret).toString('base64')]) {
      expect(all).not.toContain(needle);
    }
  }
  expect(all).not.toContain(webhookSecret);
  expect(all).not.toContain('whsec_');
});

it('the ledger audit holds over everything this file wrote', async () => {
  expect((await auditLedger(db)).problems).toEqual([]);
});
