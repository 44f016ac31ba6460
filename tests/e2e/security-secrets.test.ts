import { execFile } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { promisify } from 'node:util';
import { crc32 } from 'node:zlib';
import sharp from 'sharp';
import { digestSecret } from '@tes/core';
import { revokeApiKey } from '@tes/db';
import { addKey } from '@tes/testing';
import { startStack, waitForExecution, type TestStack } from '../stack';

/**
 * Secrets never at rest and never in logs. Every API key secret this file creates, every
 * Authorization value it sends, every presigned URL the service hands out and the bytes of an
 * uploaded file are collected; then the whole database (pg_dump) and every log record of
 * gateway, worker and relay (debug level) must contain none of them. The api_keys table holds
 * exactly sha256(secret). A second round feeds secrets to the service through places a careless
 * logger would echo (unknown paths, query strings, headers, bodies) and greps again.
 */
const exec = promisify(execFile);
let stack: TestStack;
const secrets: { keyId: string; secret: string }[] = [];
const authValues = new Set<string>();
const presignedUrls: string[] = [];
const marker = `TESMARKER${randomBytes(12).toString('hex')}`;
let png: Buffer;
let priceVersion: string;

beforeAll(async () => {
  stack = await startStack();
  png = await pngWithText(marker);
});

afterAll(async () => {
  if (!stack) return;
  const audit = await stack.audit();
  await stack.stop();
  expect(audit.problems).toEqual([]);
});

/** A valid PNG with a tEXt chunk right after IHDR: the marker sits in the first 100 bytes of the file. */
async function pngWithText(text: string): Promise<Buffer> {
  const base = await sharp({ create: { width: 16, height: 12, channels: 3, background: '#6a3d9a' } })
    .png()
    .toBuffer();
  const typeAndData = Buffer.concat([Buffer.from('tEXt'), Buffer.from('Comment\0'), Buffer.from(text)]);
  const chunk = Buffer.alloc(typeAndData.length + 8);
  chunk.writeUInt32BE(typeAndData.length - 4, 0);
  typeAndData.copy(chunk, 4);
  chunk.writeUInt32BE(crc32(typeAndData), chunk.length - 4);
  const ihdrEnd = 8 + 8 + 13 + 4;
  return Buffer.concat([base.subarray(0, ihdrEnd), chunk, base.subarray(ihdrEnd)]);
}

/** Every Authorization value sent goes through here, so each is grepped for later. */
function auth(secret: string, scheme = 'Bearer'): Record<string, string> {
  const value = `${scheme} ${secret}`;
  authValues.add(value);
  return { Authorization: value };
}

async function newKey(projectId: string, options: Parameters<typeof addKey>[2] = {}): Promise<string> {
  const k = await addKey(stack.db, projectId, options);
  secrets.push({ keyId: k.id, secret: k.secret });
  return k.secret;
}

async function download(secret: string, executionId: string, artifactId: string): Promise<string> {
  const res = await stack.http().get(`/tools/executions/${executionId}/artifacts/${artifactId}/download`).set(auth(secret));
  expect(res.status).toBe(200);
  presignedUrls.push(res.body.data.url);
  return res.body.data.url;
}

async function run(secret: string, tool: string, args: Record<string, unknown>): Promise<Record<string, unknown>> {
  const q = await stack.http().post('/tools/quote').set(auth(secret)).send({ tool, arguments: args });
  expect(q.status).toBe(200);
  const sub = await stack
    .http()
    .post(`/tools/${tool}`)
    .set({ ...auth(secret), 'Idempotency-Key': randomUUID() })
    .send({ tool, arguments: args, priceVersion, maximumChargeMicros: q.body.data.maximumChargeMicros });
  expect(sub.status).toBe(202);
  const e = await waitForExecution(stack, secret, sub.body.data.id, undefined, 30_000);
  expect(e.status).toBe('succeeded');
  return e;
}

interface Needle {
  label: string;
  value: string;
}

/** Everything that must appear nowhere. Labels, not values, go into failure messages. */
function needles(): Needle[] {
  const out: Needle[] = [];
  secrets.forEach(({ secret }, i) => out.push({ label: `secret #${i}`, value: secret }, { label: `secret #${i} random part`, value: secret.slice(-32) }));
  [...authValues].forEach((value, i) => out.push({ label: `Authorization value #${i}`, value }));
  presignedUrls.forEach((url, i) => {
    out.push({ label: `presigned URL #${i}`, value: url });
    out.push({ label: `presigned URL #${i} X-Amz-Signature`, value: new URL(url).searchParams.get('X-Amz-Signature')! });
  });
  const b64 = png.toString('base64');
  const at = png.indexOf(marker);
  out.push(
    { label: 'file marker', value: marker },
    { label: 'file base64', value: b64 },
    // the marker as it appears inside the file's base64 (a log of a truncated body would hold this)
    { label: 'file marker inside the base64', value: b64.slice(Math.ceil(at / 3) * 4, Math.floor((at + marker.length) / 3) * 4) },
    { label: 'file marker base64', value: Buffer.from(marker).toString('base64').slice(0, 24) },
  );
  // (The S3 secret access key of the embedded server is the fixed 6-character "S3RVER", equal
  // to its access key id, which presigned URLs carry by design: not a meaningful needle here.)
  for (const n of out) expect(n.value.length).toBeGreaterThanOrEqual(16); // a short needle would match by chance
  return out;
}

async function dumpDatabase(): Promise<string> {
  const { stdout } = await exec('pg_dump', ['--no-owner', '--dbname', stack.config.databaseUrl], { maxBuffer: 512 * 1024 * 1024 });
  return stdout;
}

async function leaks(): Promise<string[]> {
  const dump = await dumpDatabase();
  const logs = stack.logs.text();
  // positive controls: the dump holds data, the capture holds records of all three services
  expect(dump).toContain('COPY public.api_keys');
  for (const event of ['gateway.http.request', 'gateway.artifact.presigned', 'gateway.upload.stored', 'worker.execution.settled', 'relay.started'])
    expect(logs).toContain(event);
  const hits: string[] = [];
  for (const n of needles()) {
    if (dump.includes(n.value)) hits.push(`database dump: ${n.label}`);
    if (logs.includes(n.value)) hits.push(`logs: ${n.label}`);
  }
  return hits;
}

describe('secrets at rest and in logs', () => {
  it('a full round (keys, quote, submit, upload, media tool, downloads) leaves no secret in the database or any log', async () => {
    const p = await stack.seed({ creditMicros: 1_000_000 });
    secrets.push({ keyId: p.keyId, secret: p.secret });
    const member = await newKey(p.projectId, { role: 'MEMBER' });
    await newKey(p.projectId, { scopes: ['project:read'] });
    const revoked = await newKey(p.projectId);
    await revokeApiKey(stack.db, secrets[secrets.length - 1]!.keyId);
    await newKey(p.projectId, { expiresAt: new Date(Date.now() - 1_000) });
    const q = await stack.seed();
    secrets.push({ keyId: q.keyId, secret: q.secret });

    priceVersion = (await stack.http().get('/tools').set(auth(p.secret))).body.data.priceVersion;
    for (const s of secrets) await stack.http().get('/tools/project').set(auth(s.secret)); // 200, 401 revoked, 401 expired
    expect((await stack.http().get('/tools/project').set(auth(revoked))).status).toBe(401);

    const up = await stack
      .http()
      .post('/tools/upload')
      .set(auth(member))
      .send({ mimeType: 'image/png', data: png.toString('base64') });
    expect(up.status).toBe(200);
    const sleep = await run(p.secret, 'test.sleep', { seconds: 0, steps: 2, costMicrosPerStep: 50 });
    // the worker reads the marked file's bytes: its logs are in scope too
    const transform = await run(member, 'image.transform', { fileId: up.body.data.id, resize: { width: 8, height: 6, fit: 'fill' } });
    for (const e of [sleep, transform]) {
      const art = (e.output as { artifacts: { id: string }[] }).artifacts[0]!.id;
      const url = await download(p.secret, e.id as string, art);
      await download(member, e.id as string, art);
      expect((await fetch(url)).status).toBe(200); // a live URL, so its absence from logs means something
    }
    expect(await leaks()).toEqual([]);
  });

  it('api_keys stores per key a 32-byte digest equal to sha256(secret), and nothing else derived from it', async () => {
    expect(secrets.length).toBe(6); // the keys of the first test, revoked and expired ones included
    const rows = await stack.db('api_keys').whereIn(
      'id',
      secrets.map((s) => s.keyId),
    );
    expect(rows).toHaveLength(secrets.length);
    for (const { keyId, secret } of secrets) {
      const row = rows.find((r) => r.id === keyId)!;
      expect(Buffer.isBuffer(row.digest) && row.digest.length).toBe(32);
      expect((row.digest as Buffer).equals(digestSecret(secret))).toBe(true);
      expect(row.lookup_id).toBe(secret.slice(4, 12)); // the lookup id is an index, not a secret: it is not in the needles
      for (const [column, value] of Object.entries(row)) {
        if (typeof value === 'string') expect([column, value.includes(secret.slice(-32))]).toEqual([column, false]);
      }
    }
  });

  it('secrets fed to the service through paths, queries, headers and bodies do not reach a log', async () => {
    const [s, t] = [secrets[0]!.secret, secrets[1]!.secret];
    const http = () => stack.http();
    const logged: string[] = [];
    const rid = (n: string) => {
      const id = `hostile-${n}-${randomUUID()}`;
      logged.push(id);
      return { 'X-Request-Id': id };
    };
    const statuses = [
      // a valid secret on unknown paths, one of them holding the secret itself
      (
        await http()
          .get(`/tools/no-such-route/${s}`)
          .set({ ...auth(s), ...rid('unknown-tools-path') })
      ).status,
      (
        await http()
          .get(`/nowhere?key=${s}`)
          .set({ ...auth(s), ...rid('unknown-path') })
      ).status,
      (
        await http()
          .get(`/tools/executions/${s}`)
          .set({ ...auth(s), ...rid('id-path') })
      ).status,
      // an Idempotency-Key that is a secret, too long (3 x 45 + 2 = 137 > 128 characters)
      (
        await http()
          .post('/tools/test.sleep')
          .set({ ...auth(s), 'Idempotency-Key': `${s}.${s}.${s}`, ...rid('idem') })
          .send({})
      ).status,
      // query strings: a legal filter value, an illegal cursor, an unknown parameter
      (
        await http()
          .get(`/tools/executions?tool=${s}`)
          .set({ ...auth(s), ...rid('query-tool') })
      ).status,
      (
        await http()
          .get(`/tools/executions?before=${s}`)
          .set({ ...auth(s), ...rid('query-before') })
      ).status,
      (
        await http()
          .get(`/tools/executions?${s}=1`)
          .set({ ...auth(s), ...rid('query-name') })
      ).status,
      // a secret as the request id: legal characters, so it is echoed back and becomes the logged requestId
      (
        await http()
          .get('/tools/project')
          .set({ ...auth(t), 'X-Request-Id': s })
      ).status,
      // malformed Authorization values carrying a valid secret
      (
        await http()
          .get('/tools/project')
          .set({ ...auth(s, 'Token'), ...rid('scheme') })
      ).status,
      (
        await http()
          .get('/tools/project')
          .set({ ...auth(`${s} ${t}`), ...rid('two-tokens') })
      ).status,
      // bodies: broken JSON, a secret as the tool name, as upload data, inside tool arguments
      (
        await http()
          .post('/tools/quote')
          .set({ ...auth(s), 'Content-Type': 'application/json', ...rid('bad-json') })
          .send(`{"tool":"${s}`)
      ).status,
      (
        await http()
          .post('/tools/quote')
          .set({ ...auth(s), ...rid('tool-name') })
          .send({ tool: s, arguments: {} })
      ).status,
      (
        await http()
          .post('/tools/upload')
          .set({ ...auth(s), ...rid('upload') })
          .send({ mimeType: 'image/png', data: s })
      ).status,
      (
        await http()
          .post('/tools/quote')
          .set({ ...auth(s), ...rid('arguments') })
          .send({ tool: 'test.sleep', arguments: { seconds: s, steps: 1, costMicrosPerStep: 0 } })
      ).status,
    ];
    expect(statuses).toEqual([404, 404, 404, 400, 200, 400, 400, 200, 401, 401, 400, 404, 400, 400]);
    // Text Postgres cannot store (NUL, unpaired surrogates) once reached the database and
    // answered 500; it is refused at the edge now, and nothing of it reaches a log.
    const render = { tool: 'image.render', arguments: { text: `\u0000${s}`, width: 16, height: 16 } };
    const refused = [
      await http()
        .get(`/tools/executions?tool=%00${s}`)
        .set({ ...auth(s), ...rid('nul-query') }),
      await http()
        .post('/tools/quote')
        .set({ ...auth(s), ...rid('nul-quote') })
        .send(render),
      await http()
        .post('/tools/image.render')
        .set({ ...auth(s), 'Idempotency-Key': randomUUID(), ...rid('nul-arguments') })
        .send({ ...render, priceVersion, maximumChargeMicros: 1_000 }),
      await http()
        .post('/tools/quote')
        .set({ ...auth(s), ...rid('lone-surrogate') })
        .set('Content-Type', 'application/json')
        .send(`{"tool":"image.render","arguments":{"text":"\\ud800${s}"}}`),
    ];
    for (const res of refused) expect([res.status, res.body.error?.message]).toEqual([400, 'invalid_request']);
    expect(stack.logs.text()).not.toContain('gateway.http.unhandled');
    // every hostile request was logged (so "not in the logs" is not vacuous) ...
    const logs = stack.logs.text();
    for (const id of logged) expect([id, logs.includes(id)]).toEqual([id, true]);
    // ... and nothing it carried is there, nor in the database
    expect(await leaks()).toEqual([]);
  });
});
