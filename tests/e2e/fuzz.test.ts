import fc from 'fast-check';
import type supertest from 'supertest';
import { ERROR_CODES } from '@tes/core';
import { addKey, loadOpenApi } from '@tes/testing';
import { bearer, startStack, type TestStack } from '../stack';
import { makeMedia } from '../media';

/*
 * Schema-driven fuzzing of every operation of services/gateway/openapi.json and of each tool's
 * inputSchema and examples (GET /tools): valid requests, then mutated bodies, headers, query
 * strings and path ids. For every response: never a 5xx; Cache-Control: no-store; the JSON
 * envelope (`data`, or `error` whose status fits the HTTP code and whose message is an
 * error code of docs/api.md#errors); and it matches openapi.json (stack.http() throws on a mismatch).
 * After the run: executions, reservations and journal entries exist only for accepted submits.
 * Deterministic: FUZZ_SEED (fixed default), FUZZ_RUNS. A failure prints seed and path and
 * shrinks to a minimal request. No worker runs, so nothing moves after acceptance.
 */
const SEED = Number(process.env.FUZZ_SEED ?? 20261121);
const RUNS = Number(process.env.FUZZ_RUNS ?? 1500);

type Method = 'get' | 'post' | 'put' | 'patch' | 'delete';
type Who = 'main' | 'member' | 'poor';
type Schema = Record<string, unknown>;
/** `{EXE:n}`, `{OTHER}` and `{KEY:n}` are filled in when sent, from what the run has created so far. */
interface Req {
  method: Method;
  path: string;
  who: Who;
  headers: Record<string, string>;
  body?: string;
  replay?: number;
  executionId?: string;
}

const doc = loadOpenApi();
const STATUS_OF_HTTP: Record<number, string[]> = {
  400: ['INVALID_ARGUMENT', 'FAILED_PRECONDITION'],
  401: ['UNAUTHENTICATED'],
  403: ['PERMISSION_DENIED'],
  404: ['NOT_FOUND'],
  405: ['UNIMPLEMENTED'],
  409: ['ALREADY_EXISTS'],
  413: ['INVALID_ARGUMENT'],
  429: ['RESOURCE_EXHAUSTED'],
  503: ['UNAVAILABLE'],
};
// Just the magic bytes the upload route checks first (it then measures the file, so these
// are refused as file_content_mismatch; the uploads the examples use are real, see beforeAll).
const FILES: Record<string, Buffer> = {
  'image/png': Buffer.from('89504e470d0a1a0a0000000d49484452', 'hex'),
  'image/jpeg': Buffer.from('ffd8ffe000104a464946', 'hex'),
  'audio/wav': Buffer.from('RIFF\x24\x00\x00\x00WAVEfmt ', 'latin1'),
  'audio/mpeg': Buffer.from('ID3\x04\x00\x00\x00\x00\x00\x00', 'latin1'),
  'video/mp4': Buffer.from('\x00\x00\x00\x18ftypisom\x00\x00\x02\x00', 'latin1'),
};

let stack: TestStack;
const keys = {} as Record<Who, { secret: string; projectId: string }>;
let tools: { name: string; inputSchema: Schema; examples: Record<string, unknown>[] }[] = [];
let priceVersion = '';
const fileIds: string[] = [];
/** Examples that quote as they are (their file ids replaced by uploads of a format the tool takes). */
const quotable: { tool: string; args: Record<string, unknown> }[] = [];
/** Executions created by a 202 that was not a replay: the only ones allowed to exist. */
const accepted = new Map<string, { projectId: string; reserved: number }>();
const sentSubmits: Req[] = [];
let otherProjectExecution = '';
const statuses = new Map<number, number>();

beforeAll(async () => {
  stack = await startStack({ worker: false, relay: false, env: { RATE_LIMIT_PER_MINUTE: '100000' } });
  const main = await stack.seed({ creditMicros: 1_000_000_000_000 });
  const poor = await stack.seed({ creditMicros: 1_000, monthlyCapMicros: 600 }); // 429s for balance and cap
  const member = await addKey(stack.db, main.projectId, { scopes: ['tools:read', 'executions:read'], role: 'MEMBER' });
  Object.assign(keys, { main, poor, member: { secret: member.secret, projectId: main.projectId } });
  const catalog = (await stack.http().get('/tools').set(bearer(main.secret)).expect(200)).body.data;
  priceVersion = catalog.priceVersion;
  tools = catalog.tools.map((t: { name: string; inputSchema: Schema; example: Record<string, unknown>; models: { example?: Record<string, unknown> }[] }) => ({
    name: t.name,
    inputSchema: t.inputSchema,
    examples: [t.example, ...t.models.flatMap((m) => (m.example ? [m.example] : []))],
  }));
  const real: Record<string, Buffer> = {
    'image/png': await makeMedia.png('64x48'),
    'image/jpeg': await makeMedia.jpeg('64x48'),
    'audio/wav': await makeMedia.wav(1),
    'audio/mpeg': await makeMedia.mp3(1),
    'video/mp4': await makeMedia.mp4(1, '64x48'),
  };
  for (const [mimeType, bytes] of Object.entries(real)) {
    fileIds.push(
      (
        await stack
          .http()
          .post('/tools/upload')
          .set(bearer(main.secret))
          .send({ mimeType, data: bytes.toString('base64') })
          .expect(200)
      ).body.data.id,
    );
  }
  for (const t of tools) {
    for (const example of t.examples) {
      for (const fileId of JSON.stringify(example).includes('"file_') ? fileIds : ['-']) {
        const args = JSON.parse(JSON.stringify(example).replace(/"file_[0-9A-Z]{26}"/g, `"${fileId}"`)) as Record<string, unknown>;
        if ((await stack.http().post('/tools/quote').set(bearer(main.secret)).send({ tool: t.name, arguments: args })).status !== 200) continue;
        quotable.push({ tool: t.name, args });
        break;
      }
    }
  }
  // An execution of another project: to the main key its id must be a 404, never a 403.
  const other = await stack
    .http()
    .post('/tools/test.sleep')
    .set({ ...bearer(poor.secret), 'Idempotency-Key': 'other-project-1' })
    .send({ tool: 'test.sleep', arguments: { seconds: 0, steps: 1, costMicrosPerStep: 100 }, priceVersion, maximumChargeMicros: 100 })
    .expect(202);
  otherProjectExecution = other.body.data.id;
  accepted.set(otherProjectExecution, { projectId: poor.projectId, reserved: 100 });
}, 60_000);

afterAll(async () => {
  await stack?.stop();
});

// ---- values ----
/** Follows $ref and merges allOf, so a schema of the document can be generated from. */
function deref(s: unknown): Schema {
  let node = (s ?? {}) as Schema;
  for (let i = 0; typeof node.$ref === 'string' && i < 10; i++) {
    node = (node.$ref
      .slice(2)
      .split('/')
      .reduce<unknown>((n, k) => (n as Schema | undefined)?.[k.replace(/~1/g, '/').replace(/~0/g, '~')], doc) ?? {}) as Schema;
  }
  if (!Array.isArray(node.allOf)) return node;
  const { allOf, ...rest } = node;
  return Object.assign({}, ...(allOf as unknown[]).map(deref), rest) as Schema;
}

const NASTY = [
  '\u0000',
  'a\u0000b',
  '\ud800',
  'x\udfff',
  '\u202eevil\u202c',
  'שלום',
  'مرحبا',
  '👩‍👩‍👧‍👦',
  '𝕏',
  '\ufeff',
  'Z̴̡a̸l̷g̶o',
  '\r\n',
  '../../etc/passwd',
  '<script>x</script>',
  "'; DROP TABLE executions; --",
  '%00',
  '${x}',
  '\\',
  '"',
  ' ',
  '',
];
const text = fc.oneof(fc.string({ unit: 'binary', maxLength: 30 }), fc.string({ unit: 'grapheme', maxLength: 30 }), fc.constantFrom(...NASTY));
// Up to ~56 KiB of UTF-8, under the 64 KiB limit; escaped NULs (6 bytes each) go over it on purpose: 413.
const huge = fc.tuple(fc.constantFrom('x', 'é', '👍', '\u0000', '\ud800'), fc.constantFrom(1_000, 9_000, 14_000)).map(([c, n]) => c.repeat(n));
/** JSON text that JSON.stringify cannot produce, spliced in where a value goes. */
class Raw {
  constructor(readonly text: string) {}
}
const raw = fc
  .constantFrom(
    '1e999',
    '-1e999',
    '-0',
    '0.1e-400',
    '123456789012345678901234567890',
    '"\\ud800"',
    '"\\u0000"',
    '"a\\udfff\\ud800"',
    '['.repeat(20_000) + ']'.repeat(20_000),
    '{"a":'.repeat(5_000) + '1' + '}'.repeat(5_000),
    '[' + '{},'.repeat(9_000) + '{}]',
  )
  .map((t) => new Raw(t));
const number = fc.oneof(fc.integer(), fc.double(), fc.constantFrom(-1, 1.5, 2 ** 53, -(2 ** 53), 1e21, Number.MAX_VALUE, Number.MIN_VALUE));
const badValue: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 4, arbitrary: text },
  { weight: 1, arbitrary: huge },
  { weight: 3, arbitrary: number },
  { weight: 1, arbitrary: fc.boolean() },
  { weight: 1, arbitrary: fc.constant(null) },
  { weight: 2, arbitrary: fc.jsonValue({ maxDepth: 3 }) },
  { weight: 2, arbitrary: raw },
  { weight: 1, arbitrary: fc.array(fc.jsonValue({ maxDepth: 1 }), { maxLength: 4 }) },
);
function toJsonText(value: unknown): string {
  const raws: string[] = [];
  const json = JSON.stringify(value, (_k, v: unknown) => (v instanceof Raw ? `@@raw${raws.push(v.text) - 1}@@` : v)) ?? 'null';
  return json.replace(/"@@raw(\d+)@@"/g, (_m, i: string) => raws[Number(i)]!);
}

/** (Mostly) valid instances of a JSON Schema: enough to get past validation and into the money path. */
function fromSchema(input: unknown, depth = 0): fc.Arbitrary<unknown> {
  const s = deref(input);
  const num = (k: string, d: number) => (typeof s[k] === 'number' ? s[k] : d);
  const branches = (s.oneOf ?? s.anyOf) as Schema[] | undefined;
  if (depth > 4) return fc.jsonValue({ maxDepth: 1 });
  if ('const' in s) return fc.constant(s.const);
  if (Array.isArray(s.enum)) return fc.constantFrom(...(s.enum as unknown[]));
  const pattern = typeof s.pattern === 'string' ? new RegExp(s.pattern) : undefined;
  switch (Array.isArray(s.type) ? s.type[0] : s.type) {
    case 'object': {
      const props = (s.properties ?? {}) as Record<string, Schema>;
      const model = Object.fromEntries(Object.entries(props).map(([k, p]) => [k, fromSchema(p, depth + 1)]));
      return fc.constantFrom(...(branches?.length ? branches : [{}])).chain((b) =>
        fc.record(model, {
          requiredKeys: [...new Set([...((s.required ?? []) as string[]), ...((b.required ?? []) as string[])])].filter((k) => k in props),
        }),
      );
    }
    case 'array':
      return fc.array(fromSchema(s.items, depth + 1), {
        minLength: num('minItems', 0),
        maxLength: Math.max(num('minItems', 0), Math.min(num('maxItems', 3), 4)),
      });
    case 'integer':
      return fc.integer({ min: Math.max(num('minimum', -1e9), -1e9), max: Math.min(num('maximum', 1e9), 1e9) });
    case 'number':
      return fc.double({ min: num('minimum', -1e9), max: num('maximum', 1e9), noNaN: true, noDefaultInfinity: true });
    case 'boolean':
      return fc.boolean();
    case 'string':
      if (pattern && String(pattern).includes('file_')) return fc.oneof(fc.constantFrom(...fileIds), fc.stringMatching(pattern));
      return pattern ? fc.stringMatching(pattern) : fc.string({ minLength: num('minLength', 0), maxLength: Math.min(num('maxLength', 30), 30) });
    default:
      return branches?.length
        ? fc.oneof(...branches.map((b) => fromSchema({ ...s, oneOf: undefined, anyOf: undefined, ...b }, depth + 1)))
        : fc.jsonValue({ maxDepth: 1 });
  }
}

type Path = (string | number)[];
/** Every path into a value (nested objects and arrays too), so a mutation can hit `arguments.slides.0.text`. */
function paths(v: unknown, prefix: Path = [], out: Path[] = []): Path[] {
  if (v === null || typeof v !== 'object' || v instanceof Raw || prefix.length > 4) return out;
  for (const k of Object.keys(v)) {
    out.push([...prefix, k]);
    paths((v as Schema)[k], [...prefix, k], out);
  }
  return out;
}
function edit(v: unknown, i: number, change: (parent: Schema, key: string) => void): unknown {
  const all = paths(v);
  const at = all[i % Math.max(1, all.length)];
  if (!at) return v;
  const copy = structuredClone(v) as Schema;
  change(
    at.slice(0, -1).reduce<Schema>((n, k) => n[k] as Schema, copy),
    String(at[at.length - 1]),
  );
  return copy;
}
/** The valid value; or it with one field given a bad value, dropped, or one field added; or no object at all. */
const mutate = (valid: fc.Arbitrary<unknown>) =>
  fc.oneof(
    { weight: 4, arbitrary: valid },
    {
      weight: 4,
      arbitrary: fc.tuple(valid, fc.nat(), badValue).map(([v, i, bad]) =>
        edit(v, i, (p, k) => {
          p[k] = bad;
        }),
      ),
    },
    {
      weight: 1,
      arbitrary: fc.tuple(valid, fc.nat()).map(([v, i]) =>
        edit(v, i, (p, k) => {
          Reflect.deleteProperty(p, k);
        }),
      ),
    },
    {
      weight: 1,
      arbitrary: fc
        .tuple(valid, fc.string({ maxLength: 12 }), badValue)
        .map(([v, k, bad]) => (v && typeof v === 'object' && !Array.isArray(v) ? { ...v, [k]: bad } : v)),
    },
    { weight: 1, arbitrary: badValue },
  );
const body = (valid: fc.Arbitrary<unknown>) =>
  fc.oneof(
    { weight: 12, arbitrary: mutate(valid).map(toJsonText) },
    {
      weight: 1,
      arbitrary: fc.constantFrom(
        '{',
        '{"tool": ',
        'null',
        '"x"',
        '123',
        '[]',
        '{"a":1}junk',
        '\ufeff{}',
        ' ',
        "{'a':1}",
        'NaN',
        '{"__proto__":{"x":1}}',
        `{"tool":"${'x'.repeat(70_000)}"}`,
      ),
    },
    { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 60 }) },
  );

// Header values: what an HTTP client can send at all (latin1, no control characters).
const headerText = fc
  .array(
    fc.integer({ min: 0x20, max: 0xff }).filter((c) => c !== 0x7f),
    { maxLength: 40 },
  )
  .map((cs) => String.fromCharCode(...cs));
const encode = (s: string) =>
  [...Buffer.from(s, 'utf8')]
    .map((b) => (/[A-Za-z0-9._~-]/.test(String.fromCharCode(b)) ? String.fromCharCode(b) : `%${b.toString(16).padStart(2, '0')}`))
    .join('');
const JUNK_SEGMENTS = ['%ZZ', '%', '%ED%A0%80', '%C0%80', '%00', '..', '%2e%2e', '%2F', 'exe_%2F..', '%E2%80%AE', 'exe_' + 'A'.repeat(5_000), 'x'.repeat(300)];
const segment = (prefix: string) =>
  fc.oneof(
    { weight: 4, arbitrary: fc.nat().map((n) => `{EXE:${n}}`) },
    { weight: 1, arbitrary: fc.constant('{OTHER}') },
    { weight: 2, arbitrary: fc.stringMatching(/^[0-9A-Z]{26}$/).map((u) => `${prefix}_${u}`) },
    { weight: 2, arbitrary: text.map((t) => encode(`${prefix}_${t}`)) },
    { weight: 2, arbitrary: fc.constantFrom(...JUNK_SEGMENTS) },
  );
const contentType = fc.oneof(
  { weight: 14, arbitrary: fc.constant('application/json') },
  { weight: 1, arbitrary: headerText },
  {
    weight: 3,
    arbitrary: fc.constantFrom(
      'application/json; charset=utf-8',
      'APPLICATION/JSON',
      'application/json; charset=utf-16',
      'application/json; charset=latin1',
      'text/plain',
      'application/x-www-form-urlencoded',
      'multipart/form-data; boundary=x',
      'application/merge-patch+json',
      'application/json;;;',
      'image/png',
    ),
  },
);
const idempotencyKey = fc.oneof(
  { weight: 6, arbitrary: fc.stringMatching(/^[A-Za-z0-9._:-]{8,64}$/) },
  { weight: 1, arbitrary: fc.stringMatching(/^[A-Za-z0-9]{1,7}$/) },
  { weight: 1, arbitrary: fc.stringMatching(/^[A-Za-z0-9]{129,200}$/) },
  { weight: 1, arbitrary: headerText },
  { weight: 2, arbitrary: fc.nat().map((n) => `{KEY:${n}}`) },
  { weight: 1, arbitrary: fc.constantFrom('', 'MISSING', 'key with spaces', 'key/with/slash', 'clé-unicode') },
);
const mimeType = fc.oneof(
  fc.constantFrom(...Object.keys(FILES), 'audio/x-wav', 'audio/wave', 'IMAGE/PNG', ' image/png ', 'image/gif', 'application/octet-stream', 'image/png; x=y'),
  text,
);
const base64 = fc.oneof(
  fc.tuple(fc.constantFrom(...Object.values(FILES)), fc.uint8Array({ maxLength: 64 })).map(([head, tail]) => Buffer.concat([head, tail]).toString('base64')),
  fc.uint8Array({ maxLength: 200 }).map((b) => Buffer.from(b).toString('base64')), // valid Base64, bytes of no declared format
  fc.constantFrom(...Object.values(FILES)).map((b) => b.toString('base64url')),
  fc.constantFrom(
    '',
    '=',
    'A',
    'AB',
    'ABC',
    'AB==CD',
    'QUJD\n',
    ' QUJD',
    'QUJD====',
    'QUJ=',
    '-_-_',
    'QUJD!',
    'data:image/png;base64,iVBORw0KGgo=',
    '🙂🙂🙂🙂',
  ),
  text,
);

/** A body of an operation's request schema; where it names a tool and its arguments, a tool-aware one. */
function requestBody(schema: Schema): fc.Arbitrary<{ tool?: string; value: unknown }> {
  const props = (deref(schema).properties ?? {}) as Record<string, Schema>;
  if ('data' in props) return fc.record({ mimeType, data: base64 }).map((value) => ({ value }));
  if (!('arguments' in props)) return fromSchema(schema).map((value) => ({ value }));
  const input = fc.oneof(
    { weight: 3, arbitrary: fc.constantFrom(...quotable) },
    { weight: 2, arbitrary: fc.constantFrom(...tools).chain((t) => fromSchema(t.inputSchema).map((args) => ({ tool: t.name, args }))) },
  );
  const price =
    'priceVersion' in props
      ? {
          priceVersion: fc.constantFrom(priceVersion, priceVersion, priceVersion, '2020-01-01.1'),
          maximumChargeMicros: fc.constantFrom(10_000_000_000, 10_000_000_000, 0, 1),
        }
      : {};
  return input.chain(({ tool, args }) => fc.record({ tool: fc.constant(tool), arguments: fc.constant(args), ...price }).map((value) => ({ tool, value })));
}

// ---- requests ----
/** Counterexamples print as a short request line, not 60 KiB of body. */
const describeReq = (r: Req) =>
  `${r.method.toUpperCase()} ${r.path.slice(0, 300)} as ${r.who} ${JSON.stringify(r.headers).slice(0, 300)} body=${JSON.stringify(r.body?.slice(0, 300))}${(r.body?.length ?? 0) > 300 ? `… (${r.body!.length} chars)` : ''}`;
const printable = (r: Req): Req => Object.defineProperty(r, fc.toStringMethod, { value: () => describeReq(r), enumerable: false });

/** One arbitrary per documented operation (repeated by weight), clean submits, undocumented methods and replays. */
function requests(): fc.Arbitrary<Req> {
  const who = fc.constantFrom<Who>('main', 'main', 'main', 'main', 'main', 'member', 'poor');
  const junkQuery = fc.constantFrom('x=1', 'limit[]=1', 'limit[a]=2', '__proto__=1', 'status=queued&status=failed', '&&', '=', 'before=%ZZ');
  const ops: fc.Arbitrary<Req>[] = [];
  const undocumented: [string, Method][] = [];
  for (const [template, item] of Object.entries(doc.paths)) {
    for (const method of ['get', 'post', 'put', 'patch', 'delete'] as const) {
      const op = (item as Record<string, Schema>)[method];
      if (!op) {
        undocumented.push([template, method]);
        continue;
      }
      const params = ((op.parameters ?? []) as unknown[]).map(deref);
      const queryParams = params
        .filter((p) => p.in === 'query')
        .map((p) =>
          fc.oneof(
            { weight: 3, arbitrary: fromSchema(p.schema).map((v) => `${String(p.name)}=${encode(String(v))}`) },
            { weight: 1, arbitrary: text.map((v) => `${String(p.name)}=${encode(v)}`) },
            {
              weight: 2,
              arbitrary: fc
                .constantFrom('-1', '0', '101', '1e3', '1.5', 'abc', '', 'unknown', 'exe_x', '%ZZ', '%00', '{EXE:0}', 'QUEUED', '%EF%BC%91')
                .map((v) => `${String(p.name)}=${v}`),
            },
          ),
        );
      const query =
        queryParams.length > 0
          ? fc.array(fc.oneof({ weight: 6, arbitrary: fc.oneof(...queryParams) }, { weight: 1, arbitrary: junkQuery }), { maxLength: 4 })
          : fc.oneof({ weight: 6, arbitrary: fc.constant([]) }, { weight: 1, arbitrary: fc.array(junkQuery, { minLength: 1, maxLength: 2 }) });
      // the body the gateway checks: quote's and submit's envelopes (x-gateway-schema), whose tool-aware bodies requestBody() builds
      const media = (deref(op.requestBody).content as Record<string, Schema> | undefined)?.['application/json'];
      const bodySchema = (media?.['x-gateway-schema'] ?? media?.schema) as Schema | undefined;
      const content = bodySchema
        ? fc.option(
            requestBody(bodySchema).chain(({ tool, value }) => body(fc.constant(value)).map((t) => ({ tool, text: t }))),
            { freq: 20 },
          )
        : // Operations without a request body sometimes get one anyway: it must not break them.
          fc.oneof(
            { weight: 9, arbitrary: fc.constant(null) },
            { weight: 1, arbitrary: body(fc.jsonValue({ maxDepth: 2 })).map((t) => ({ tool: undefined, text: t })) },
          );
      const segments = fc.tuple(
        ...template.split('/').map((seg) => {
          const name = /^\{(.+)\}$/.exec(seg)?.[1];
          if (!name) return fc.constant(seg);
          if (name !== 'tool') return segment(name === 'artifactId' ? 'art' : 'exe');
          // null: the tool the body names, so most submits get past tool_mismatch
          return fc.oneof(
            { weight: 8, arbitrary: fc.constant(null) },
            { weight: 1, arbitrary: fc.constantFrom(...tools.map((t) => t.name)) },
            { weight: 1, arbitrary: text.map((t) => encode(t) || 'x') },
            { weight: 1, arbitrary: fc.constantFrom(...JUNK_SEGMENTS) },
          );
        }),
      );
      const idempotency = params.some((p) => p.name === 'Idempotency-Key') ? idempotencyKey : fc.constant('MISSING');
      const requestId = fc.option(fc.oneof(fc.stringMatching(/^[A-Za-z0-9._:-]{1,128}$/), headerText), { freq: 3 });
      const arb = fc.record({ who, segments, query, content, requestId, contentType, idempotency }).map((g): Req => ({
        method,
        path: g.segments.map((x) => x ?? g.content?.tool ?? 'test.sleep').join('/') + (g.query.length ? `?${g.query.join('&')}` : ''),
        who: g.who,
        ...(g.content ? { body: g.content.text } : {}),
        headers: {
          ...(g.requestId === null ? {} : { 'X-Request-Id': g.requestId }),
          ...(g.idempotency === 'MISSING' ? {} : { 'Idempotency-Key': g.idempotency }),
          ...(g.content ? { 'Content-Type': g.contentType } : {}),
        },
      }));
      const weight = template === '/tools/{tool}' ? 10 : bodySchema ? 4 : template.startsWith('/tools') ? 2 : 1;
      for (let i = 0; i < weight; i++) ops.push(arb);
    }
  }
  // Clean submits keep the money path busy: the final accounting compares with them, replays and reused keys refer to them.
  const clean = fc
    .tuple(fc.constantFrom(...quotable), fc.stringMatching(/^[A-Za-z0-9._:-]{8,40}$/), fc.constantFrom<Who>('main', 'main', 'main', 'poor'))
    .map(([{ tool, args }, key, w]): Req => ({
      method: 'post',
      path: `/tools/${tool}`,
      who: w,
      headers: { 'Idempotency-Key': key, 'Content-Type': 'application/json' },
      body: JSON.stringify({ tool, arguments: args, priceVersion, maximumChargeMicros: 10_000_000_000 }),
    }));
  for (let i = 0; i < 6; i++) ops.push(clean);
  // A method the document does not list for a path: the validator accepts 405 method_not_allowed only.
  ops.push(
    fc
      .tuple(fc.constantFrom(...undocumented), who)
      .map(([[template, method], w]): Req => ({ method, path: template.replace(/\{[^}]+\}/g, '{EXE:0}'), who: w, headers: {} })),
  );
  ops.push(fc.nat().map((n): Req => ({ method: 'post', path: '(replay)', who: 'main', headers: {}, replay: n })));
  return fc.oneof(...ops).map(printable);
}

function fill(s: string): string {
  const ids = [...accepted.keys()].filter((id) => id !== otherProjectExecution);
  return s
    .replace(/\{EXE:(\d+)\}/g, (_m, n: string) => ids[Number(n) % ids.length] ?? 'exe_none')
    .replace(/\{OTHER\}/g, otherProjectExecution)
    .replace(/\{KEY:(\d+)\}/g, (_m, n: string) => sentSubmits[Number(n) % Math.max(1, sentSubmits.length)]?.headers['Idempotency-Key'] ?? 'fallback-key-1');
}

async function send(template: Req): Promise<void> {
  const original = template.replay === undefined ? undefined : sentSubmits[template.replay % Math.max(1, sentSubmits.length)];
  if (template.replay !== undefined && !original) return;
  const r: Req = original ?? {
    ...template,
    path: fill(template.path),
    headers: Object.fromEntries(Object.entries(template.headers).map(([k, v]) => [k, fill(v)])),
  };
  if (r.method === 'get' && /^\/tools\/executions\/[^/?]+\/events(\?|$)/.test(r.path)) return sendToStream(r);
  let t = stack
    .http()
    [r.method](r.path)
    .set({ ...bearer(keys[r.who].secret), ...r.headers })
    .timeout(20_000);
  if (r.body !== undefined) t = t.send(r.body);
  const res: supertest.Response = await t.catch((err: unknown) => {
    throw new Error(`${(err as Error).message}\nrequest: ${describeReq(r)}`);
  });
  statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
  const where = `${describeReq(r)}\n -> ${res.status} ${(res.text ?? '').slice(0, 400)}`;
  if (res.status >= 500) throw new Error(`5xx: ${where}`);
  if (res.headers['cache-control'] !== 'no-store') throw new Error(`Cache-Control ${res.headers['cache-control']}: ${where}`);
  // /openapi.json and /docs serve documents: their 200s are checked against openapi.json alone.
  if (!r.path.startsWith('/tools') && res.status < 400) return;
  if (res.headers['content-type'] !== 'application/json; charset=utf-8') throw new Error(`Content-Type ${res.headers['content-type']}: ${where}`);
  const envelope = res.body as { data?: { id?: string; reservedMicros?: number }; error?: { status?: string; message?: string } };
  const errorOk =
    STATUS_OF_HTTP[res.status]?.includes(envelope.error?.status ?? '') && (ERROR_CODES as readonly string[]).includes(envelope.error?.message ?? '');
  if (res.status < 400 ? !('data' in envelope) : !errorOk) throw new Error(`not the envelope: ${where}`);

  const isSubmit = r.method === 'post' && /^\/tools\/[^/?]+(\?|$)/.test(r.path) && !/^\/tools\/(quote|upload)(\?|$)/.test(r.path);
  if (!isSubmit || res.status >= 300) return;
  const data = envelope.data ?? {};
  const id = data.id!;
  if (original) {
    if (res.headers['idempotent-replayed'] !== 'true' || id !== original.executionId) throw new Error(`replay of ${original.executionId} gave ${id}: ${where}`);
  } else if (res.headers['idempotent-replayed'] !== 'true') {
    if (res.status !== 202 || accepted.has(id)) throw new Error(`a new execution must be a 202 with a new id: ${where}`);
    accepted.set(id, { projectId: keys[r.who].projectId, reserved: data.reservedMicros! });
    sentSubmits.push({ ...r, executionId: id });
  }
}

/**
 * The event stream of a running execution does not end by itself: its answer is judged by its
 * status and headers, then the connection is dropped. Refusals are the usual envelope.
 */
async function sendToStream(r: Req): Promise<void> {
  const abort = new AbortController();
  const headers: Record<string, string> = { ...bearer(keys[r.who].secret), ...r.headers };
  const res = await fetch(`${stack.baseUrl}${r.path}`, { method: 'GET', headers, signal: abort.signal });
  statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
  const where = `${describeReq(r)}\n -> ${res.status}`;
  try {
    if (res.status >= 500) throw new Error(`5xx: ${where}`);
    if (res.headers.get('cache-control') !== 'no-store') throw new Error(`Cache-Control ${res.headers.get('cache-control')}: ${where}`);
    if (res.status === 200) {
      if (res.headers.get('content-type') !== 'text/event-stream; charset=utf-8') throw new Error(`Content-Type ${res.headers.get('content-type')}: ${where}`);
      return;
    }
    const envelope = (await res.json()) as { error?: { status?: string; message?: string } };
    const errorOk =
      STATUS_OF_HTTP[res.status]?.includes(envelope.error?.status ?? '') && (ERROR_CODES as readonly string[]).includes(envelope.error?.message ?? '');
    if (!errorOk) throw new Error(`not the envelope: ${where} ${JSON.stringify(envelope).slice(0, 400)}`);
  } finally {
    abort.abort();
  }
}

it('answers every generated request with the envelope, never a 5xx, and as documented', async () => {
  const started = Date.now();
  let sent = 0;
  await fc.assert(
    fc.asyncProperty(requests(), async (req) => {
      sent += 1;
      await send(req);
    }),
    { seed: SEED, numRuns: RUNS },
  );
  console.log(
    `fuzz: ${sent} requests in ${Date.now() - started} ms, seed ${SEED}; statuses ${JSON.stringify(Object.fromEntries(statuses))}; ${accepted.size} accepted`,
  );
}, 180_000);

it('refuses bad credentials with 401 and the envelope', async () => {
  // Fewer than the 30 failed authentications per minute after which the address is slowed down.
  const values = [
    '',
    'Bearer',
    'Bearer ',
    'Basic dXNlcjpwYXNz',
    'bearer x',
    `Bearer ${keys.main.secret}x`,
    `Bearer ${keys.main.secret.slice(0, -1)}`,
    'Bearer tes_00000000_' + 'a'.repeat(32),
    `Bearer ${'A'.repeat(4000)}`,
    'Bearer \u00e9\u00e8',
    `Bearer  ${keys.main.secret} extra`,
    'Bearer tes__',
  ];
  for (const v of values) {
    const res = await stack
      .http()
      .get('/tools/project')
      .set(v === '' ? {} : { Authorization: v });
    expect([res.status, res.body.error?.status, res.headers['cache-control']]).toEqual([401, 'UNAUTHENTICATED', 'no-store']);
  }
});

it('created executions, reservations and journal entries only for accepted submits', async () => {
  for (const who of ['main', 'poor'] as const) {
    const projectId = keys[who].projectId;
    const rows: { id: string; reserved_micros: number; status: string }[] = await stack
      .db('executions')
      .where({ project_id: projectId })
      .select('id', 'reserved_micros', 'status');
    const mine = [...accepted].filter(([, a]) => a.projectId === projectId);
    expect(rows.map((e) => [e.id, e.reserved_micros]).sort()).toEqual(mine.map(([id, a]) => [id, a.reserved]).sort());
    // Credits carry no execution; reservations only accepted ones; settlements only cancels of queued work (charged 0).
    const cancelled = new Set(rows.filter((e) => e.status === 'cancelled').map((e) => e.id));
    const journal: { kind: string; execution_id: string | null; account: string; amount_micros: number }[] = await stack
      .db('ledger_entries')
      .where({ project_id: projectId });
    const unexplained = journal.filter(
      (j) =>
        !(j.kind === 'credit'
          ? j.execution_id === null
          : j.kind === 'reserve'
            ? accepted.has(j.execution_id!)
            : j.kind === 'settle' && cancelled.has(j.execution_id!) && !(j.account === 'charged' && j.amount_micros !== 0)),
    );
    expect(unexplained).toEqual([]);
    const open = rows.filter((e) => e.status === 'queued').reduce((sum, e) => sum + e.reserved_micros, 0);
    expect((await stack.db('projects').where({ id: projectId }).first()).reserved_micros).toBe(open);
  }
  expect((await stack.audit()).problems).toEqual([]);
});
