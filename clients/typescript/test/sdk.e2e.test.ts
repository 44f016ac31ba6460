import { createHash } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadOpenApi, OpenApiValidator } from '@tes/testing';
import { startGateway, type RunningGateway } from '../../../services/gateway/src/server';
import { projectBalance, useStack } from '../../../tests/stack';
import { untyped } from './fake-api';
import {
  InsufficientBalanceError,
  InvalidRequestError,
  MonthlyCapExceededError,
  NotFoundError,
  TesAbortError,
  TesClient,
  TesNetworkError,
  isValidIdempotencyKey,
  type Execution,
  type FetchLike,
  type TesClientOptions,
  type ToolArguments,
} from '../src';

/**
 * The SDK against the real stack (gateway, worker and relay on PostgreSQL, RabbitMQ and S3):
 * every answer the client receives from the API is validated against openapi.json, and
 * every request is recorded so the tests can count sends.
 */
const stack = useStack();
let dir: string;
const validator = new OpenApiValidator(loadOpenApi());
const sha256 = (b: Buffer): string => createHash('sha256').update(b).digest('hex');

interface Sent {
  method: string;
  path: string;
  status: number | 'lost';
  idempotencyKey: string | undefined;
  prefer: string | undefined;
  lastEventId: string | undefined;
  body: string | undefined;
}

/**
 * A recording fetch. `loseAnswer` decides, per send, to throw away an answer that did
 * arrive (the request was applied on the server, but the caller sees a network error).
 */
function recordingFetch(loseAnswer: (s: Sent) => boolean = () => false): { fetch: FetchLike; sent: Sent[] } {
  const sent: Sent[] = [];
  const wrapped: FetchLike = async (input, init) => {
    const url = new URL(input);
    const headers = new Headers(init.headers);
    const s: Sent = {
      method: init.method ?? 'GET',
      path: url.pathname + url.search,
      status: 'lost',
      idempotencyKey: headers.get('idempotency-key') ?? undefined,
      prefer: headers.get('prefer') ?? undefined,
      lastEventId: headers.get('last-event-id') ?? undefined,
      body: init.body as string | undefined,
    };
    sent.push(s);
    const res = await fetch(input, init);
    s.status = res.status;
    if (!input.startsWith(stack.baseUrl)) return res; // a presigned object-storage URL
    if (res.headers.get('content-type')?.startsWith('text/event-stream')) return res; // read by the client as it comes
    const text = await res.text();
    validator.assertValid(s.method, s.path, res.status, Object.fromEntries(res.headers), text ? JSON.parse(text) : undefined);
    if (loseAnswer(s)) {
      s.status = 'lost';
      throw new TypeError('fetch failed', { cause: new Error('socket hang up (simulated after the answer arrived)') });
    }
    return new Response(text, { status: res.status, headers: res.headers });
  };
  return { fetch: wrapped, sent };
}

function client(secret: string, fetchFn?: FetchLike, options: Partial<TesClientOptions> = {}): TesClient {
  return new TesClient({
    apiKey: secret,
    baseUrl: stack.baseUrl,
    pollIntervalMs: 200,
    retry: { baseDelayMs: 50 },
    ...(fetchFn ? { fetch: fetchFn } : {}),
    ...options,
  });
}

async function executionCount(projectId: string): Promise<number> {
  const rows = await stack.db('executions').where({ project_id: projectId }).count<{ n: string }[]>({ n: '*' });
  return Number(rows[0]!.n);
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tes-client-'));
});

afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('run', () => {
  it('test.sleep: quote, one submit with a valid generated key, followed to the end, artifact downloaded and checked', async () => {
    const p = await stack.seed({ creditMicros: 1_000_000 });
    const { fetch: f, sent } = recordingFetch();
    const seen: Execution[] = [];
    const result = await client(p.secret, f).run('test.sleep', { seconds: 0, steps: 2, costMicrosPerStep: 5 }, { onProgress: (e) => seen.push(e) });
    expect(result.execution).toMatchObject({ status: 'succeeded', chargedMicros: 10, reservedMicros: 10, progress: { completedSteps: 2, totalSteps: 2 } });
    expect(result.quote.maximumChargeMicros).toBe(10);
    expect(result.replayed).toBe(false);
    expect(isValidIdempotencyKey(result.idempotencyKey)).toBe(true);
    expect(seen[0]!.id).toBe(result.execution.id);
    expect(seen.at(-1)!.status).toBe('succeeded');
    const submits = sent.filter((s) => s.method === 'POST' && s.path === '/tools/test.sleep');
    expect(submits.map((s) => [s.status, s.idempotencyKey])).toEqual([[202, result.idempotencyKey]]);
    const row = await stack.db('executions').where({ id: result.execution.id }).first();
    expect(row.idempotency_key).toBe(result.idempotencyKey);

    expect(result.artifacts).toHaveLength(1);
    const [artifact] = result.artifacts;
    const bytes = await artifact!.download();
    expect(bytes.length).toBe(artifact!.sizeBytes);
    expect(sha256(bytes)).toBe(artifact!.sha256);
    // The object-storage request carried no API key.
    const s3 = sent.find((s) => !s.path.startsWith('/tools'));
    expect(s3?.status).toBe(200);
    expect(await projectBalance(stack.db, p.projectId)).toEqual({ available: 1_000_000 - 10, reserved: 0 });
  });

  it('image.render: the PNG downloads with the sha256 the execution names; it uploads back as the same file', async () => {
    const p = await stack.seed({ creditMicros: 1_000_000 });
    const c = client(p.secret);
    const result = await c.run('image.render', { text: 'SDK', width: 64, height: 48, format: 'png' });
    const [png] = result.artifacts;
    expect(png).toMatchObject({ mimeType: 'image/png', format: 'png' });
    const bytes = await c.download(result.execution.id, png!.id);
    expect(bytes.subarray(1, 4).toString('latin1')).toBe('PNG');
    expect(sha256(bytes)).toBe(png!.sha256);
    expect(result.execution.chargedMicros).toBe(result.quote.maximumChargeMicros);

    const path = join(dir, 'render.png');
    await writeFile(path, bytes);
    const fromPath = await c.upload(path); // MIME type detected from the bytes
    expect(fromPath).toMatchObject({ mimeType: 'image/png', format: 'png', sizeBytes: bytes.length, sha256: png!.sha256 });
    expect(fromPath.id).toMatch(/^file_/);
    expect((await c.upload(bytes, 'image/png')).id).toBe(fromPath.id); // same content, same id
    const quote = await c.quote('image.transform', { fileId: fromPath.id, format: 'jpeg' });
    expect(quote.maximumChargeMicros).toBeGreaterThan(0);
  });

  it('a lost answer to the submit: resent with the same key and body, one execution, charged once', async () => {
    const p = await stack.seed({ creditMicros: 1_000_000 });
    let lost = 0;
    const { fetch: f, sent } = recordingFetch((s) => s.method === 'POST' && s.path === '/tools/test.sleep' && lost++ === 0);
    const result = await client(p.secret, f).run('test.sleep', { seconds: 0, steps: 2, costMicrosPerStep: 5 });
    expect(result.execution.status).toBe('succeeded');
    expect(result.replayed).toBe(true);
    const submits = sent.filter((s) => s.method === 'POST' && s.path === '/tools/test.sleep');
    // the resend replays the one execution: 202 while it runs, 200 if it already ended (the
    // client's backoff before the resend can outlast a 0-second test.sleep)
    expect(submits).toHaveLength(2);
    expect(submits[0]!.status).toBe('lost');
    expect([200, 202]).toContain(submits[1]!.status);
    expect(new Set(submits.map((s) => s.idempotencyKey))).toEqual(new Set([result.idempotencyKey]));
    expect(submits[1]!.body).toBe(submits[0]!.body);
    expect(await executionCount(p.projectId)).toBe(1);
    expect(await projectBalance(stack.db, p.projectId)).toEqual({ available: 1_000_000 - 10, reserved: 0 });
  });

  it('every answer to the submit lost: the error carries the generated key; run again with it gives the same execution, charged once', async () => {
    const p = await stack.seed({ creditMicros: 1_000_000 });
    const args = { seconds: 0, steps: 2, costMicrosPerStep: 5 };
    const { fetch: f, sent } = recordingFetch((s) => s.method === 'POST' && s.path === '/tools/test.sleep');
    const err = await client(p.secret, f)
      .run('test.sleep', args)
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TesNetworkError);
    const e = err as TesNetworkError;
    const submits = sent.filter((s) => s.method === 'POST' && s.path === '/tools/test.sleep');
    expect(submits.map((s) => s.status)).toEqual(['lost', 'lost', 'lost', 'lost']);
    expect([e.mayHaveBeenAccepted, e.executionId]).toEqual([true, undefined]);
    expect(isValidIdempotencyKey(e.idempotencyKey!)).toBe(true);
    expect(new Set(submits.map((s) => s.idempotencyKey))).toEqual(new Set([e.idempotencyKey]));
    // the first send was accepted: one execution, its maximum reserved
    expect(await executionCount(p.projectId)).toBe(1);

    const { fetch: g, sent: again } = recordingFetch();
    const result = await client(p.secret, g).run('test.sleep', args, { idempotencyKey: e.idempotencyKey! });
    expect(result).toMatchObject({ idempotencyKey: e.idempotencyKey, replayed: true, execution: { status: 'succeeded', chargedMicros: 10 } });
    const resent = again.filter((s) => s.method === 'POST' && s.path === '/tools/test.sleep');
    expect(resent.map((s) => s.body)).toEqual([submits[0]!.body]);
    expect(await executionCount(p.projectId)).toBe(1);
    expect(await projectBalance(stack.db, p.projectId)).toEqual({ available: 1_000_000 - 10, reserved: 0 });
  });

  it('a definite refusal of the submit carries the key but says it was not accepted', async () => {
    const p = await stack.seed({ creditMicros: 9 });
    const err = await client(p.secret)
      .run('test.sleep', { seconds: 0, steps: 2, costMicrosPerStep: 5 }, { idempotencyKey: 'sdk-refused-1' })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InsufficientBalanceError);
    expect([(err as InsufficientBalanceError).idempotencyKey, (err as InsufficientBalanceError).mayHaveBeenAccepted]).toEqual(['sdk-refused-1', false]);
  });

  it('insufficient balance: InsufficientBalanceError after exactly one submit, nothing reserved', async () => {
    const p = await stack.seed({ creditMicros: 9 });
    const { fetch: f, sent } = recordingFetch();
    const err = await client(p.secret, f)
      .run('test.sleep', { seconds: 0, steps: 2, costMicrosPerStep: 5 })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InsufficientBalanceError);
    const e = err as InsufficientBalanceError;
    expect([e.status, e.errorStatus, e.code, e.retryable, e.retryAfterSeconds]).toEqual([429, 'RESOURCE_EXHAUSTED', 'insufficient_balance', false, undefined]);
    expect(e.details).toMatchObject({ retryable: false });
    expect(e.requestId).toBeTruthy();
    expect(e.executionId).toBeUndefined();
    expect(`${e.message} ${e.stack}`).not.toContain(p.secret);
    expect(sent.filter((s) => s.method === 'POST' && s.path === '/tools/test.sleep')).toHaveLength(1);
    expect(await executionCount(p.projectId)).toBe(0);
    expect(await projectBalance(stack.db, p.projectId)).toEqual({ available: 9, reserved: 0 });
  });

  it('monthly cap: MonthlyCapExceededError after exactly one submit', async () => {
    const p = await stack.seed({ creditMicros: 1_000_000, monthlyCapMicros: 9 });
    const { fetch: f, sent } = recordingFetch();
    const err = await client(p.secret, f)
      .run('test.sleep', { seconds: 0, steps: 2, costMicrosPerStep: 5 })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(MonthlyCapExceededError);
    expect(sent.filter((s) => s.method === 'POST' && s.path === '/tools/test.sleep')).toHaveLength(1);
    expect(await executionCount(p.projectId)).toBe(0);
  });

  it('an abort after the submit names the execution, which goes on and settles', async () => {
    const p = await stack.seed({ creditMicros: 1_000_000 });
    const c = client(p.secret);
    const controller = new AbortController();
    const err = await c
      .run('test.sleep', { seconds: 0.2, steps: 2, costMicrosPerStep: 5 }, { signal: controller.signal, onProgress: () => controller.abort(new Error('stop')) })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TesAbortError);
    const id = (err as TesAbortError).executionId!;
    expect(id).toMatch(/^exe_/);
    let e = await c.execution(id);
    while (e.status !== 'succeeded') {
      await new Promise((r) => setTimeout(r, 100));
      e = await c.execution(id);
    }
    expect(e.chargedMicros).toBe(10);
  });
});

describe('results without polling', () => {
  const render: ToolArguments<'image.render'> = { text: 'stream', width: 320, height: 240, format: 'png' };
  const toolPaths = (sent: Sent[]) =>
    sent
      .filter((s) => s.path.startsWith('/tools/') && s.path !== '/tools/quote')
      .map((s) => `${s.method} ${s.path.replace(/exe_\w+/, 'exe')}${s.prefer ? ` [${s.prefer}]` : ''}`);

  it('run() on image.render follows the stream: done well under the 5 s a poll would take, every change seen', async () => {
    const p = await stack.seed({ creditMicros: 1_000_000 });
    const { fetch: f, sent } = recordingFetch();
    const seen: Execution[] = [];
    const started = Date.now();
    // the default pollIntervalMs (5 s): only the stream can make this fast
    const result = await client(p.secret, f, { pollIntervalMs: 5_000 }).run('image.render', render, { onProgress: (e) => seen.push(e) });
    const ms = Date.now() - started;
    expect(result.execution.status).toBe('succeeded');
    expect(ms).toBeLessThan(2_500);
    expect(toolPaths(sent)).toEqual(['POST /tools/image.render', 'GET /tools/executions/exe/events']);
    expect(seen.at(-1)).toEqual(result.execution);
    expect(seen.map((e) => e.status)).toContain('running');
    const bytes = await result.artifacts[0]!.download();
    expect(sha256(bytes)).toBe(result.artifacts[0]!.sha256);
  });

  it("strategy 'wait': Prefer: wait=30 on the submit (and on each GET), no stream", async () => {
    const p = await stack.seed({ creditMicros: 1_000_000 });
    const { fetch: f, sent } = recordingFetch();
    const started = Date.now();
    const result = await client(p.secret, f, { pollIntervalMs: 5_000 }).run(
      'test.sleep',
      { seconds: 0.3, steps: 2, costMicrosPerStep: 5 },
      { strategy: 'wait' },
    );
    expect(result.execution).toMatchObject({ status: 'succeeded', chargedMicros: 10 });
    expect(Date.now() - started).toBeLessThan(3_000);
    const paths = toolPaths(sent);
    expect(paths[0]).toBe('POST /tools/test.sleep [wait=30]');
    expect(paths.slice(1).every((x) => x === 'GET /tools/executions/exe [wait=30]')).toBe(true);
    expect(sent.find((s) => s.path.endsWith('/tools/test.sleep'))!.status).toBe(200); // ended within the submit's wait
  });

  it("strategy 'poll': plain GETs, the first after the 202's Retry-After (5 s); neither Prefer nor stream", async () => {
    const p = await stack.seed({ creditMicros: 1_000_000 });
    const { fetch: f, sent } = recordingFetch();
    const started = Date.now();
    const result = await client(p.secret, f, { pollIntervalMs: 100 }).run('test.sleep', { seconds: 0.3, steps: 2, costMicrosPerStep: 5 }, { strategy: 'poll' });
    expect(result.execution.status).toBe('succeeded');
    expect(Date.now() - started).toBeGreaterThanOrEqual(5_000);
    const paths = toolPaths(sent);
    expect(paths[0]).toBe('POST /tools/test.sleep');
    expect(paths.length).toBeGreaterThanOrEqual(2);
    expect(paths.slice(1).every((x) => x === 'GET /tools/executions/exe')).toBe(true);
  });

  it('events() resumes with Last-Event-ID on the gateway restarted under it, and ends after the terminal event', async () => {
    const p = await stack.seed({ creditMicros: 1_000_000 });
    let g: RunningGateway | undefined = await startGateway(stack.config, stack.logger);
    const port = g.port;
    const stop = async () => {
      const parts = g?.parts ?? [];
      g = undefined;
      for (const part of parts) await part.stop();
    };
    try {
      const { fetch: f, sent } = recordingFetch();
      const c = new TesClient({ apiKey: p.secret, baseUrl: `http://127.0.0.1:${port}`, fetch: f, retry: { baseDelayMs: 50 } });
      const quote = await c.quote('test.sleep', { seconds: 0.6, steps: 4, costMicrosPerStep: 5 });
      const { execution } = await client(p.secret).submit(
        'test.sleep',
        { seconds: 0.6, steps: 4, costMicrosPerStep: 5 },
        { ...quote, idempotencyKey: 'sdk-restart-0001' },
      );
      const stream = c.events(execution.id);
      // each event with the number of streams opened by then: 1 while the first stream delivers
      const seen: { id: string; status: string; completed: number; streams: number }[] = [];
      const streamsOpened = () => sent.filter((s) => s.path.endsWith('/events')).length;
      let restarted: Promise<void> | undefined;
      for await (const e of stream) {
        seen.push({ id: stream.lastEventId!, status: e.status, completed: e.progress.completedSteps, streams: streamsOpened() });
        // after the second event: stop the gateway (which ends the stream); 1.5 s later (the
        // client's reconnects are refused meanwhile) start a new one on its port
        if (seen.length === 2) {
          restarted = stop().then(async () => {
            await new Promise((r) => setTimeout(r, 1_500));
            g = await startGateway({ ...stack.config, port }, stack.logger);
          });
        }
      }
      await restarted;
      expect(seen.at(-1)).toMatchObject({ status: 'succeeded', completed: 4 });
      const ids = seen.map((x) => Number(x.id));
      expect(ids).toEqual([...new Set(ids)].sort((a, b) => a - b)); // in order, none twice
      const opens = sent.filter((s) => s.path.endsWith('/events'));
      expect(opens[0]).toMatchObject({ status: 200, lastEventId: undefined });
      // refused while no gateway listened, then resumed from the last event the first stream
      // delivered: the second, or one already on its way when the gateway stopped
      const lastOfFirst = seen.filter((x) => x.streams === 1).at(-1)!;
      expect(Number(lastOfFirst.id)).toBeGreaterThanOrEqual(ids[1]!);
      expect(opens.slice(1).map((s) => s.lastEventId)).toEqual(opens.slice(1).map(() => lastOfFirst.id));
      expect(opens.slice(1, -1).every((s) => s.status === 'lost')).toBe(true);
      expect(opens.length).toBeGreaterThan(2);
      expect(opens.at(-1)!.status).toBe(200);
      const final = await c.execution(execution.id);
      expect(final.status).toBe('succeeded');
      // resuming after the terminal event: the stream has nothing more to say, and ends
      const again = c.events(execution.id, { lastEventId: String(ids.at(-1)) });
      const after: Execution[] = [];
      for await (const e of again) after.push(e);
      expect(after.map((e) => e.status)).toEqual(['succeeded']);
    } finally {
      await stop();
    }
  }, 60_000);
});

describe('reads and typed errors', () => {
  it('tools, project, usage, executions and cancel map their documents', async () => {
    const p = await stack.seed({ creditMicros: 500_000, monthlyCapMicros: 1_000_000 });
    const c = client(p.secret);
    const catalog = await c.tools();
    expect(catalog.tools.map((t) => t.name)).toEqual(expect.arrayContaining(['test.sleep', 'image.render']));
    expect(await c.project()).toMatchObject({
      project: { id: p.projectId },
      balance: { availableMicros: 500_000, reservedMicros: 0 },
      monthlyCapMicros: 1_000_000,
    });

    const quote = await c.quote('test.sleep', { seconds: 0.5, steps: 3, costMicrosPerStep: 7 });
    const { execution } = await c.submit('test.sleep', { seconds: 0.5, steps: 3, costMicrosPerStep: 7 }, { ...quote, idempotencyKey: 'sdk-cancel-0001' });
    const cancelled = await c.cancel(execution.id);
    expect(cancelled.id).toBe(execution.id);
    expect(cancelled.status === 'cancelled' || cancelled.cancelRequested).toBe(true);

    const page = await c.executions({ tool: 'test.sleep', limit: 5 });
    expect(page.data.map((e) => e.id)).toEqual([execution.id]);
    expect(page.hasMore).toBe(false);
    // request counts are written in batches (every 50 ms here): wait for the first batch
    let usage = await c.usage();
    for (let i = 0; i < 40 && usage.requestCount === 0; i++) {
      await new Promise((r) => setTimeout(r, 50));
      usage = await c.usage();
    }
    expect(usage).toMatchObject({ currency: 'usd', monthlyCapMicros: 1_000_000 });
    expect(usage.requestCount).toBeGreaterThan(0);
  });

  it('unknown tool, bad arguments, unknown execution: typed 4xx errors, each sent once', async () => {
    const p = await stack.seed({ creditMicros: 1_000 });
    const { fetch: f, sent } = recordingFetch();
    const c = client(p.secret, f);
    await expect(c.quote(untyped('no.such.tool'), {})).rejects.toMatchObject({ constructor: NotFoundError, code: 'tool_not_found', status: 404 });
    // `as string`: the untyped call, so the server's check is what refuses these arguments
    const bad = await c.quote(untyped('test.sleep'), { steps: 99 }).catch((e: unknown) => e);
    expect(bad).toBeInstanceOf(InvalidRequestError);
    expect((bad as InvalidRequestError).details?.errors).toEqual(expect.arrayContaining([expect.objectContaining({ instancePath: '/steps' })]));
    // A typo reads as a sentence naming the field and the property it misspells (issue #29);
    // the response passed the OpenAPI check in recordingFetch, error.message is still the code.
    const typo = await c.quote(untyped('audio.speech'), { txt: 'x' }).catch((e: unknown) => e);
    expect(typo).toBeInstanceOf(InvalidRequestError);
    expect((typo as InvalidRequestError).code).toBe('invalid_arguments');
    expect((typo as InvalidRequestError).message).toMatch(
      /^invalid arguments: arguments\.txt is not a property of audio\.speech; did you mean text\? \(invalid_arguments, HTTP 400, request \S+\)$/,
    );
    await expect(c.execution('exe_01JD3Z8X4V6W2Q9R7T5Y1M3N8K')).rejects.toMatchObject({ code: 'execution_not_found' });
    expect(sent).toHaveLength(4);
    await expect(new TesClient({ apiKey: 'tes_nope', baseUrl: stack.baseUrl }).tools()).rejects.toMatchObject({
      code: 'platform_api_key_invalid',
      status: 401,
    });
  });
});
