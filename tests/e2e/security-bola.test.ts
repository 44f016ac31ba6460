import { randomUUID } from 'node:crypto';
import sharp from 'sharp';
import type supertest from 'supertest';
import { newId, ROLES, SCOPES, type Role, type Scope } from '@tes/core';
import { addKey } from '@tes/testing';
import { bearer, startStack, waitForExecution, type TestStack } from '../stack';

/**
 * Broken object-level authorization, as a matrix: every route that takes an id, asked by
 * every kind of key of project B about project A's objects. The invariant: the answer is
 * byte-identical (status, headers, body) to the answer for a well-formed id that exists
 * nowhere — so B learns nothing, not even existence — and A's state does not move.
 * Existence leaks typically hide in a different code (403 instead of 404,
 * execution_not_cancellable, artifact_not_found instead of execution_not_found), a header
 * (Location, Retry-After) or a detail; comparing whole answers catches all of them.
 */
let stack: TestStack;
let priceVersion: string;
let a: { projectId: string; secret: string; member1: string; member2: string };
const ids = { aDone: '', aArt: '', aQueued: '', aFile: '', bDone: '', bArt: '' };
let transformMax: number;
interface BKey {
  label: string;
  secret: string;
  scopes: Scope[];
  role: Role;
}
const bKeys: BKey[] = [];
let baseline: Snapshot;

beforeAll(async () => {
  stack = await startStack();
  const seededA = await stack.seed({ creditMicros: 1_000_000 });
  a = {
    ...seededA,
    member1: (await addKey(stack.db, seededA.projectId, { role: 'MEMBER', name: 'A member 1' })).secret,
    member2: (await addKey(stack.db, seededA.projectId, { role: 'MEMBER', name: 'A member 2' })).secret,
  };
  // B: an all-scopes key of each role, and one key per (single scope, role).
  const b = await stack.seed({ creditMicros: 1_000_000 });
  bKeys.push({ label: 'all/ADMIN', secret: b.secret, scopes: [...SCOPES], role: 'ADMIN' });
  bKeys.push({ label: 'all/MEMBER', secret: (await addKey(stack.db, b.projectId, { role: 'MEMBER' })).secret, scopes: [...SCOPES], role: 'MEMBER' });
  for (const scope of SCOPES) {
    for (const role of ROLES) {
      const k = await addKey(stack.db, b.projectId, { scopes: [scope], role, name: `${scope} ${role}` });
      bKeys.push({ label: `${scope}/${role}`, secret: k.secret, scopes: [scope], role });
    }
  }
  priceVersion = (await stack.http().get('/tools').set(bearer(a.secret))).body.data.priceVersion;

  ids.aDone = await submitSleep(a.secret, { seconds: 0, steps: 1, costMicrosPerStep: 100 });
  ids.bDone = await submitSleep(b.secret, { seconds: 0, steps: 1, costMicrosPerStep: 100 });
  ids.aArt = await artifactOf(a.secret, ids.aDone);
  ids.bArt = await artifactOf(b.secret, ids.bDone);
  const png = await sharp({ create: { width: 8, height: 8, channels: 3, background: '#224466' } })
    .png()
    .toBuffer();
  const up = await stack
    .http()
    .post('/tools/upload')
    .set(bearer(a.secret))
    .send({ mimeType: 'image/png', data: png.toString('base64') });
  expect(up.status).toBe(200);
  ids.aFile = up.body.data.id;
  // Without a worker, A's next execution stays queued: the state a cancel would change at once.
  await stack.stopWorker();
  ids.aQueued = await submitSleep(a.secret, { seconds: 0, steps: 2, costMicrosPerStep: 100 });

  // Controls: with A's own key these exact requests succeed, so a 404 for B means something.
  expect((await stack.http().get(`/tools/executions/${ids.aQueued}`).set(bearer(a.secret))).body.data.status).toBe('queued');
  expect((await stack.http().get(`/tools/executions/${ids.aDone}/artifacts/${ids.aArt}/download`).set(bearer(a.secret))).status).toBe(200);
  const quote = await stack
    .http()
    .post('/tools/quote')
    .set(bearer(a.secret))
    .send({ tool: 'image.transform', arguments: { fileId: ids.aFile } });
  expect(quote.status).toBe(200);
  transformMax = quote.body.data.maximumChargeMicros;
  baseline = await snapshot();
}, 60_000);

afterAll(async () => {
  if (!stack) return;
  const audit = await stack.audit();
  await stack.stop();
  expect(audit.problems).toEqual([]);
});

async function submitSleep(secret: string, args: { seconds: number; steps: number; costMicrosPerStep: number }): Promise<string> {
  const res = await stack
    .http()
    .post('/tools/test.sleep')
    .set({ ...bearer(secret), 'Idempotency-Key': randomUUID() })
    .send({ tool: 'test.sleep', arguments: args, priceVersion, maximumChargeMicros: args.steps * args.costMicrosPerStep });
  expect(res.status).toBe(202);
  return res.body.data.id;
}

async function artifactOf(secret: string, id: string): Promise<string> {
  const e = await waitForExecution(stack, secret, id);
  expect(e.status).toBe('succeeded');
  return (e.output as { artifacts: { id: string }[] }).artifacts[0]!.id;
}

interface Snapshot {
  executions: unknown[];
  projects: unknown[];
  ledger: unknown[];
  files: unknown[];
  artifacts: unknown[];
}

/** Everything about A that a cross-project request could change, plus B's executions. */
async function snapshot(): Promise<Snapshot> {
  const byA = (table: string) => stack.db(table).where({ project_id: a.projectId }).orderBy('id');
  return {
    executions: await stack.db('executions').orderBy('id'),
    projects: await stack.db('projects').where({ id: a.projectId }),
    ledger: await byA('ledger_entries'),
    files: await byA('files'),
    artifacts: await byA('artifacts'),
  };
}

// Per-response headers that legitimately differ between two identical answers.
const VOLATILE = new Set(['x-request-id', 'date', 'connection', 'keep-alive', 'ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset', 'ratelimit-policy']);

/** The whole answer, with the ids the caller sent replaced (echoing the caller's own input reveals nothing). */
function answer(res: supertest.Response, sent: string[]) {
  let body = res.text;
  for (const id of sent) body = body.split(id).join('<sent-id>');
  const headers = Object.fromEntries(Object.entries(res.headers).filter(([k]) => !VOLATILE.has(k)));
  return { status: res.status, headers, body };
}

interface Probe {
  route: string;
  scope: Scope;
  /** The answer a key with the scope must get: the unknown-id answer. */
  code: [number, string];
  /** A's ids used in the request, and a fresh well-formed unknown id of the same kind for each. */
  theirs: () => string[];
  request: (secret: string, id: string[]) => supertest.Test;
}

const http = () => stack.http();
const transformBody = (fileId: string) => ({ tool: 'image.transform', arguments: { fileId }, priceVersion, maximumChargeMicros: transformMax });
const probes: Probe[] = [
  {
    route: 'GET execution (A succeeded)',
    scope: 'executions:read',
    code: [404, 'execution_not_found'],
    theirs: () => [ids.aDone],
    request: (s, [e]) => http().get(`/tools/executions/${e}`).set(bearer(s)),
  },
  {
    route: 'GET execution (A queued)',
    scope: 'executions:read',
    code: [404, 'execution_not_found'],
    theirs: () => [ids.aQueued],
    request: (s, [e]) => http().get(`/tools/executions/${e}`).set(bearer(s)),
  },
  {
    route: 'cancel (A queued)',
    scope: 'tools:execute',
    code: [404, 'execution_not_found'],
    theirs: () => [ids.aQueued],
    request: (s, [e]) => http().post(`/tools/executions/${e}/cancel`).set(bearer(s)),
  },
  {
    route: 'cancel (A succeeded)',
    scope: 'tools:execute',
    code: [404, 'execution_not_found'],
    theirs: () => [ids.aDone],
    request: (s, [e]) => http().post(`/tools/executions/${e}/cancel`).set(bearer(s)),
  },
  {
    route: 'download (A execution, A artifact)',
    scope: 'executions:read',
    code: [404, 'execution_not_found'],
    theirs: () => [ids.aDone, ids.aArt],
    request: (s, [e, art]) => http().get(`/tools/executions/${e}/artifacts/${art}/download`).set(bearer(s)),
  },
  {
    route: "download (B's own execution, A artifact)",
    scope: 'executions:read',
    code: [404, 'artifact_not_found'],
    theirs: () => [ids.aArt],
    request: (s, [art]) => http().get(`/tools/executions/${ids.bDone}/artifacts/${art}/download`).set(bearer(s)),
  },
  {
    route: 'quote image.transform {fileId: A file}',
    scope: 'tools:read',
    code: [400, 'file_not_found'],
    theirs: () => [ids.aFile],
    request: (s, [f]) =>
      http()
        .post('/tools/quote')
        .set(bearer(s))
        .send({ tool: 'image.transform', arguments: { fileId: f } }),
  },
  {
    route: 'submit image.transform {fileId: A file}',
    scope: 'tools:execute',
    code: [400, 'file_not_found'],
    theirs: () => [ids.aFile],
    request: (s, [f]) =>
      http()
        .post('/tools/image.transform')
        .set({ ...bearer(s), 'Idempotency-Key': randomUUID() })
        .send(transformBody(f!)),
  },
];

const unknownLike = (id: string) => newId(id.slice(0, id.indexOf('_')) as 'exe' | 'art' | 'file');

describe(`BOLA matrix: ${probes.length} routes x ${SCOPES.length * ROLES.length + 2} keys of project B`, () => {
  it.each(probes.map((p) => [p.route, p] as const))('%s: every B key gets exactly the unknown-id answer', async (_route, probe) => {
    for (const key of bKeys) {
      const theirs = probe.theirs();
      const unknown = theirs.map(unknownLike);
      const got = answer(await probe.request(key.secret, theirs), theirs);
      const none = answer(await probe.request(key.secret, unknown), unknown);
      const context = `${probe.route} with B key ${key.label}`;
      expect({ context, ...got }).toEqual({ context, ...none });
      const expected = key.scopes.includes(probe.scope)
        ? { status: probe.code[0], message: probe.code[1] }
        : { status: 403, message: 'platform_api_key_scope_required', requiredScope: probe.scope };
      const body = JSON.parse(got.body) as { error: { message: string; details?: { requiredScope?: string } } };
      expect({
        context,
        status: got.status,
        message: body.error.message,
        ...(expected.status === 403 ? { requiredScope: body.error.details?.requiredScope } : {}),
      }).toEqual({ context, ...expected });
    }
  });

  it("GET /tools/executions never lists A's executions for any B key, with any filter", async () => {
    const queries = [
      '',
      '?limit=100',
      '?status=queued',
      '?status=succeeded',
      '?tool=test.sleep',
      '?tool=image.transform',
      `?before=${newId('exe')}`,
      `?before=${ids.aQueued}&limit=100`,
    ];
    // control: the same queries do find A's executions for A's own key
    const own = await http().get('/tools/executions?limit=100').set(bearer(a.secret));
    expect(own.body.data.map((e: { id: string }) => e.id)).toEqual(expect.arrayContaining([ids.aDone, ids.aQueued]));
    for (const key of bKeys) {
      for (const q of queries) {
        const res = await http().get(`/tools/executions${q}`).set(bearer(key.secret));
        if (!key.scopes.includes('executions:read')) {
          expect([key.label, q, res.status, res.body.error?.message]).toEqual([key.label, q, 403, 'platform_api_key_scope_required']);
          continue;
        }
        expect([key.label, q, res.status]).toEqual([key.label, q, 200]);
        for (const e of res.body.data as { id: string }[]) expect([key.label, q, e.id]).toEqual([key.label, q, ids.bDone]);
      }
    }
  });

  it("A's executions, balance, journal, files and artifacts did not change; B created nothing", async () => {
    expect(await snapshot()).toEqual(baseline);
  });
});

describe('cancel role rule within a project', () => {
  it('a MEMBER that did not create the execution gets 403; the creating MEMBER and an ADMIN may cancel', async () => {
    const byMember = await submitSleep(a.member1, { seconds: 0, steps: 1, costMicrosPerStep: 10 });
    const other = await http().post(`/tools/executions/${byMember}/cancel`).set(bearer(a.member2));
    expect([other.status, other.body.error]).toEqual([403, { status: 'PERMISSION_DENIED', message: 'execution_cancel_not_allowed' }]);
    const still = await http().get(`/tools/executions/${byMember}`).set(bearer(a.member2));
    expect(still.body.data).toMatchObject({ status: 'queued', cancelRequested: false, chargedMicros: 0 });
    const creator = await http().post(`/tools/executions/${byMember}/cancel`).set(bearer(a.member1));
    expect([creator.status, creator.body.data.status, creator.body.data.chargedMicros]).toEqual([200, 'cancelled', 0]);

    const second = await submitSleep(a.member1, { seconds: 0, steps: 1, costMicrosPerStep: 10 });
    const admin = await http().post(`/tools/executions/${second}/cancel`).set(bearer(a.secret));
    expect([admin.status, admin.body.data.status]).toEqual([200, 'cancelled']);

    // an ADMIN's execution is not a MEMBER's to cancel either
    const byAdmin = await submitSleep(a.secret, { seconds: 0, steps: 1, costMicrosPerStep: 10 });
    const member = await http().post(`/tools/executions/${byAdmin}/cancel`).set(bearer(a.member1));
    expect([member.status, member.body.error?.message]).toEqual([403, 'execution_cancel_not_allowed']);
    expect((await http().get(`/tools/executions/${byAdmin}`).set(bearer(a.secret))).body.data.status).toBe('queued');
  });
});
