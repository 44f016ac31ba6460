import { addKey } from '@tes/testing';
import { bearer, useStack } from '../stack';

/**
 * Webhook endpoints through the API (issue #29): a project's ADMIN key manages them; the
 * outbound rule refuses private addresses at creation (this stack runs without
 * WEBHOOK_ALLOW_PRIVATE, as production does); one project never sees or touches another's.
 * Delivery itself, to a local receiver: webhooks-api-delivery.test.ts.
 */
const stack = useStack({ worker: false, relay: false });

/** A public unicast address, so no DNS is involved; nothing is ever sent to it here. */
const PUBLIC_URL = 'https://93.184.215.14/tes-hook';
const UNKNOWN_ID = 'whk_01JD3Z8X4V6W2Q9R7T5Y1M3N8K';

const create = (secret: string, body: Record<string, unknown>) => stack.http().post('/tools/webhooks').set(bearer(secret)).send(body);

/** Every webhook operation on endpoint `id`, as (label, request) pairs. */
function everyOperation(secret: string, id: string) {
  return [
    ['list', () => stack.http().get('/tools/webhooks').set(bearer(secret))],
    ['create', () => create(secret, { url: PUBLIC_URL })],
    ['delete', () => stack.http().delete(`/tools/webhooks/${id}`).set(bearer(secret))],
    ['rotate', () => stack.http().post(`/tools/webhooks/${id}/rotate-secret`).set(bearer(secret))],
    ['deliveries', () => stack.http().get(`/tools/webhooks/${id}/deliveries`).set(bearer(secret))],
    ['test', () => stack.http().post(`/tools/webhooks/${id}/test`).set(bearer(secret))],
  ] as const;
}

describe('managing endpoints with the project key', () => {
  it('creates (secret shown once), lists without secrets, rotates, deletes', async () => {
    const p = await stack.seed();
    const made = await create(p.secret, { url: PUBLIC_URL, events: ['execution.succeeded', 'execution.failed'] });
    expect(made.status).toBe(201);
    expect(made.body.data).toEqual({
      id: expect.stringMatching(/^whk_/),
      url: PUBLIC_URL,
      events: ['execution.succeeded', 'execution.failed'],
      createdAt: expect.any(String),
      secret: expect.stringMatching(/^whsec_/),
    });
    const id = made.body.data.id as string;
    // stored as the admin CLI stores it: the relay signs with this very secret
    expect((await stack.db('webhook_endpoints').where({ id }).first('secret', 'project_id')).secret).toBe(made.body.data.secret);

    const listed = await stack.http().get('/tools/webhooks').set(bearer(p.secret));
    expect(listed.status).toBe(200);
    expect(listed.body.data).toEqual([{ id, url: PUBLIC_URL, events: ['execution.succeeded', 'execution.failed'], createdAt: made.body.data.createdAt }]);
    expect(JSON.stringify(listed.body)).not.toContain('whsec_');

    const all = await create(p.secret, { url: `${PUBLIC_URL}/all` });
    expect(all.body.data.events).toEqual(['execution.succeeded', 'execution.failed', 'execution.cancelled', 'execution.needs_review']);

    const rotated = await stack.http().post(`/tools/webhooks/${id}/rotate-secret`).set(bearer(p.secret));
    expect(rotated.status).toBe(200);
    expect(rotated.body.data.secret).toMatch(/^whsec_/);
    expect(rotated.body.data.secret).not.toBe(made.body.data.secret);
    expect((await stack.db('webhook_endpoints').where({ id }).first('secret')).secret).toBe(rotated.body.data.secret);

    const deliveries = await stack.http().get(`/tools/webhooks/${id}/deliveries?limit=5`).set(bearer(p.secret));
    expect(deliveries.status).toBe(200);
    expect(deliveries.body.data).toEqual([]);

    const gone = await stack.http().delete(`/tools/webhooks/${id}`).set(bearer(p.secret));
    expect(gone.status).toBe(200);
    expect(gone.body.data).toEqual({ id, deleted: true });
    const again = await stack.http().delete(`/tools/webhooks/${id}`).set(bearer(p.secret));
    expect(again.status).toBe(404);
    expect(again.body.error.message).toBe('webhook_endpoint_not_found');
    expect((await stack.http().get('/tools/webhooks').set(bearer(p.secret))).body.data.map((e: { id: string }) => e.id)).toEqual([all.body.data.id]);
  });

  it('refuses a body that is not the schema, and an eleventh endpoint', async () => {
    const p = await stack.seed();
    for (const body of [{}, { url: PUBLIC_URL, events: ['execution.started'] }, { url: PUBLIC_URL, events: [] }, { url: PUBLIC_URL, secret: 'whsec_mine' }]) {
      const r = await create(p.secret, body);
      expect({ body, status: r.status, code: r.body.error?.message }).toEqual({ body, status: 400, code: 'invalid_request' });
    }
    for (let i = 0; i < 10; i++) expect((await create(p.secret, { url: `${PUBLIC_URL}/${i}` })).status).toBe(201);
    const over = await create(p.secret, { url: `${PUBLIC_URL}/10` });
    expect(over.status).toBe(400);
    expect(over.body.error.details.errors[0].message).toMatch(/at most 10 webhook endpoints/);
  });
});

describe('the outbound rule, at creation', () => {
  it.each([
    ['http://127.0.0.1:8080/hook', '127.0.0.1', 'loopback'],
    ['http://169.254.169.254/latest/meta-data/', '169.254.169.254', 'linkLocal'],
    ['https://10.1.2.3/hook', '10.1.2.3', 'private'],
    ['http://192.168.0.10/hook', '192.168.0.10', 'private'],
    ['http://[::1]:9000/hook', '::1', 'loopback'],
    ['http://[::ffff:127.0.0.1]/hook', '::ffff:7f00:1', 'IPv4-mapped loopback'],
    ['http://[fd00::1]/hook', 'fd00::1', 'uniqueLocal'],
    // a name that resolves to loopback (/etc/hosts): judged by its addresses, as at delivery
    ['http://localhost:9/hook', undefined, 'loopback'],
  ])('refuses %s with a 400 that says why', async (url, address, range) => {
    const p = await stack.seed();
    const r = await create(p.secret, { url });
    expect(r.status).toBe(400);
    expect(r.body.error.message).toBe('invalid_request');
    const [reason] = r.body.error.details.errors;
    expect(reason.instancePath).toBe('/url');
    expect(reason.message).toMatch(/webhooks are delivered to public addresses only/);
    expect(reason.params.range).toBe(range);
    if (address) expect(reason.params.address).toBe(address);
    expect(await stack.db('webhook_endpoints').where({ project_id: p.projectId }).count()).toEqual([{ count: 0 }]);
  });

  it.each([
    ['ftp://93.184.215.14/hook', /absolute http/],
    ['not a url', /absolute http/],
    ['https://user:pw@93.184.215.14/hook', /must not carry credentials/],
  ])('refuses %s', async (url, why) => {
    const p = await stack.seed();
    const r = await create(p.secret, { url });
    expect(r.status).toBe(400);
    expect(r.body.error.details.errors[0]).toMatchObject({ instancePath: '/url', message: expect.stringMatching(why) });
  });
});

describe('who may', () => {
  it('a MEMBER key of the project is refused every operation (403), before its body is read', async () => {
    const p = await stack.seed();
    const id = (await create(p.secret, { url: PUBLIC_URL })).body.data.id as string;
    const member = (await addKey(stack.db, p.projectId, { role: 'MEMBER' })).secret;
    for (const [label, send] of everyOperation(member, id)) {
      const r = await send();
      expect({ label, status: r.status, code: r.body.error?.message, role: r.body.error?.details?.requiredRole }).toEqual({
        label,
        status: 403,
        code: 'platform_project_permission_required',
        role: 'ADMIN',
      });
    }
    const bad = await stack.http().post('/tools/webhooks').set(bearer(member)).send({ url: 'http://127.0.0.1/' });
    expect(bad.status).toBe(403);
  });

  it('an ADMIN key without project:read is refused (403 scope)', async () => {
    const p = await stack.seed();
    const id = (await create(p.secret, { url: PUBLIC_URL })).body.data.id as string;
    const narrow = (await addKey(stack.db, p.projectId, { role: 'ADMIN', scopes: ['tools:read', 'tools:execute', 'executions:read', 'usage:read'] })).secret;
    for (const [label, send] of everyOperation(narrow, id)) {
      const r = await send();
      expect({ label, status: r.status, code: r.body.error?.message, scope: r.body.error?.details?.requiredScope }).toEqual({
        label,
        status: 403,
        code: 'platform_api_key_scope_required',
        scope: 'project:read',
      });
    }
  });
});

describe('project isolation', () => {
  it("another project's ADMIN key neither sees nor touches an endpoint: the same 404 as an id that exists nowhere", async () => {
    const a = await stack.seed();
    const b = await stack.seed();
    const made = (await create(a.secret, { url: PUBLIC_URL })).body.data as { id: string; secret: string };
    expect((await stack.http().get('/tools/webhooks').set(bearer(b.secret))).body.data).toEqual([]);

    const strip = (r: { status: number; body: unknown }) => ({ status: r.status, body: r.body });
    const onA = everyOperation(b.secret, made.id).filter(([label]) => label !== 'list' && label !== 'create');
    const onNothing = everyOperation(b.secret, UNKNOWN_ID).filter(([label]) => label !== 'list' && label !== 'create');
    for (let i = 0; i < onA.length; i++) {
      const [label, send] = onA[i]!;
      const theirs = strip(await send());
      const nowhere = strip(await onNothing[i]![1]());
      expect({ label, ...theirs }).toEqual({ label, ...nowhere });
      expect(theirs.status).toBe(404);
    }
    // A's endpoint is untouched: live, same secret
    const row = await stack.db('webhook_endpoints').where({ id: made.id }).first('secret', 'deleted_at');
    expect(row).toEqual({ secret: made.secret, deleted_at: null });
    expect((await stack.http().get('/tools/webhooks').set(bearer(a.secret))).body.data.map((e: { id: string }) => e.id)).toEqual([made.id]);
  });
});
