import { bearer, useStack } from '../stack';

/**
 * GET /tools/{tool}: one tool's catalog entry, so a caller need not download the whole
 * catalog to read one tool. The same entry as in GET /tools, under the same key rules.
 */
const stack = useStack({ worker: false, audit: false });

type Json = Record<string, unknown>;

it('answers each tool with exactly its entry in GET /tools, uncached', async () => {
  const p = await stack.seed({ scopes: ['tools:read'] });
  const list = await stack.http().get('/tools').set(bearer(p.secret));
  expect(list.status).toBe(200);
  const tools = list.body.data.tools as Json[];
  expect(tools.length).toBeGreaterThan(5);
  for (const entry of tools) {
    const one = await stack
      .http()
      .get(`/tools/${entry.name as string}`)
      .set(bearer(p.secret));
    expect({ name: entry.name, status: one.status }).toEqual({ name: entry.name, status: 200 });
    expect(one.headers['cache-control']).toBe('no-store');
    expect(one.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(one.body).toEqual({ data: entry });
  }
});

it('HEAD answers like GET, without a body', async () => {
  const p = await stack.seed({ scopes: ['tools:read'] });
  const head = await stack.http().head('/tools/image.render').set(bearer(p.secret));
  expect(head.status).toBe(200);
  expect(head.headers['cache-control']).toBe('no-store');
  expect(head.text ?? '').toBe('');
});

it('an unknown tool is 404 tool_not_found, as a submit of it is; so is a name that is another route', async () => {
  const p = await stack.seed();
  for (const name of ['image.rendr', 'quote', 'upload']) {
    const res = await stack.http().get(`/tools/${name}`).set(bearer(p.secret));
    expect({ name, status: res.status }).toEqual({ name, status: 404 });
    expect(res.headers['cache-control']).toBe('no-store');
    expect(res.body).toEqual({ error: { status: 'NOT_FOUND', message: 'tool_not_found', details: { tool: name } } });
  }
});

it('takes the same keys as GET /tools: none is 401, one without tools:read is 403 with the same answer', async () => {
  const without = await stack.seed({ scopes: ['executions:read', 'tools:execute', 'project:read', 'usage:read'] });
  for (const [secret, status, message] of [
    [undefined, 401, 'platform_api_key_missing'],
    ['tes_live_not_a_key', 401, 'platform_api_key_invalid'],
    [without.secret, 403, 'platform_api_key_scope_required'],
  ] as const) {
    const auth = secret === undefined ? {} : bearer(secret);
    const list = await stack.http().get('/tools').set(auth);
    const one = await stack.http().get('/tools/image.render').set(auth);
    // an unknown tool is not told apart from a known one before the key is checked
    const unknown = await stack.http().get('/tools/image.rendr').set(auth);
    for (const res of [list, one, unknown]) {
      expect(res.status).toBe(status);
      expect(res.headers['cache-control']).toBe('no-store');
      expect(res.body.error).toEqual(list.body.error);
    }
    expect(one.body.error.message).toBe(message);
  }
});
