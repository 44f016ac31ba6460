import { NotFoundError, StreamUnavailableError, TesAbortError, type Execution, type RunOptions } from '../src';
import { ID, apiError, event, execution, fakeApi, json, queued, runRoutes, sse, untyped, type Handler, type Sent } from './fake-api';

/**
 * How run() follows an execution (strategy 'auto' | 'stream' | 'wait' | 'poll') and how 'auto'
 * falls back, against a scripted fetch (fake-api.ts): an older gateway without the stream, a
 * proxy that holds it back, a server that ignores `Prefer: wait`. The real gateway's answers
 * are in sdk.e2e.test.ts.
 */
const EVENTS = `/tools/executions/${ID}/events`;
const GET = `/tools/executions/${ID}`;

/** The requests after the quote, as "METHOD path [Prefer]". */
const calls = (sent: Sent[]): string[] =>
  sent.filter((s) => s.path !== '/tools/quote').map((s) => `${s.method} ${s.path}${s.headers.has('prefer') ? ` [${s.headers.get('prefer')}]` : ''}`);

async function run(handler: Handler, options: RunOptions = {}) {
  const api = fakeApi((req, signal) => runRoutes(req) ?? handler(req, signal));
  const seen: string[] = [];
  const result = await api.client
    .run(
      'test.sleep',
      { seconds: 0, steps: 2, costMicrosPerStep: 5 },
      { onProgress: (e: Execution) => seen.push(`${e.status} ${e.progress.completedSteps}`), ...options },
    )
    .catch((err: unknown) => err);
  return { result, seen, calls: calls(api.sent) };
}

describe('run(): auto', () => {
  it('follows the stream: every change reaches onProgress, no GET, no Prefer on the submit', async () => {
    const {
      result,
      seen,
      calls: c,
    } = await run((req, signal) =>
      req.path === EVENTS
        ? sse(signal, [event(1, execution('running', 0)), event(2, execution('running', 1)), event(3, execution('succeeded', 2))])
        : apiError(500, 'INTERNAL', 'internal_error'),
    );
    expect(result).toMatchObject({ execution: { status: 'succeeded' } });
    expect(seen).toEqual(['queued 0', 'running 0', 'running 1', 'succeeded 2']);
    expect(c).toEqual(['POST /tools/test.sleep', `GET ${EVENTS}`]);
  });

  it('an older gateway (404 on the stream): GET with Prefer: wait=30, answered when it ends', async () => {
    const {
      result,
      seen,
      calls: c,
    } = await run((req) =>
      req.path === EVENTS ? apiError(404, 'NOT_FOUND', 'route_not_found') : json(200, { data: execution('succeeded', 2) }, { 'Preference-Applied': 'wait=30' }),
    );
    expect(result).toMatchObject({ execution: { status: 'succeeded' } });
    expect(seen).toEqual(['queued 0', 'succeeded 2']);
    expect(c).toEqual(['POST /tools/test.sleep', `GET ${EVENTS}`, `GET ${GET} [wait=30]`]);
  });

  it('a 405 on the stream falls back the same way', async () => {
    const { result, calls: c } = await run((req) =>
      req.path === EVENTS
        ? apiError(405, 'NOT_FOUND', 'method_not_allowed')
        : json(200, { data: execution('succeeded', 2) }, { 'Preference-Applied': 'wait=30' }),
    );
    expect(result).toMatchObject({ execution: { status: 'succeeded' } });
    expect(c.at(-1)).toBe(`GET ${GET} [wait=30]`);
  });

  it('a proxy that holds the stream back (no first event in firstEventTimeoutMs): the stream is closed and run() waits instead', async () => {
    let stream: AbortSignal | undefined;
    const started = Date.now();
    const { result, calls: c } = await run(
      (req, signal) => {
        if (req.path !== EVENTS) return json(200, { data: execution('succeeded', 2) }, { 'Preference-Applied': 'wait=30' });
        stream = signal;
        return sse(signal, [], 'hang');
      },
      { firstEventTimeoutMs: 100 },
    );
    expect(result).toMatchObject({ execution: { status: 'succeeded' } });
    expect(Date.now() - started).toBeGreaterThanOrEqual(95);
    expect(stream?.aborted).toBe(true);
    expect(c).toEqual(['POST /tools/test.sleep', `GET ${EVENTS}`, `GET ${GET} [wait=30]`]);
  });

  it('a server that ignores Prefer (answers at once, no Preference-Applied) three times in a row: plain polling', async () => {
    let gets = 0;
    const {
      result,
      seen,
      calls: c,
    } = await run((req) => {
      if (req.path === EVENTS) return apiError(404, 'NOT_FOUND', 'route_not_found');
      gets++;
      return json(200, { data: gets < 5 ? execution('running', 1) : execution('succeeded', 2) });
    });
    expect(result).toMatchObject({ execution: { status: 'succeeded' } });
    expect(seen).toEqual(['queued 0', 'running 1', 'running 1', 'running 1', 'running 1', 'succeeded 2']);
    expect(c.slice(2)).toEqual([`GET ${GET} [wait=30]`, `GET ${GET} [wait=30]`, `GET ${GET} [wait=30]`, `GET ${GET}`, `GET ${GET}`]);
  });

  it('a 4xx other than 404/405/406 on the stream is the error of the run, naming the execution', async () => {
    const { result } = await run(() => apiError(403, 'PERMISSION_DENIED', 'platform_api_key_scope_required'));
    expect(result).toMatchObject({ code: 'platform_api_key_scope_required', executionId: ID });
  });
});

describe('run(): the other strategies', () => {
  it("'stream' does not fall back: a 404 is the error, with the execution id", async () => {
    const { result, calls: c } = await run(() => apiError(404, 'NOT_FOUND', 'route_not_found'), { strategy: 'stream' });
    expect(result).toBeInstanceOf(NotFoundError);
    expect(result).toMatchObject({ executionId: ID });
    expect(c).toEqual(['POST /tools/test.sleep', `GET ${EVENTS}`]);
  });

  it("'stream' behind a buffering proxy: StreamUnavailableError", async () => {
    const { result } = await run((_req, signal) => sse(signal, [], 'hang'), { strategy: 'stream', firstEventTimeoutMs: 50 });
    expect(result).toBeInstanceOf(StreamUnavailableError);
    expect(result).toMatchObject({ code: 'stream_unavailable', executionId: ID });
  });

  it("'wait' sends Prefer: wait=30 on the submit too: a short run is one request", async () => {
    const api = fakeApi(
      (req) =>
        runRoutes(req, () => json(200, { data: execution('succeeded', 2) }, { 'Preference-Applied': 'wait=30' })) ??
        apiError(500, 'INTERNAL', 'internal_error'),
    );
    const result = await api.client.run('test.sleep', { seconds: 0, steps: 2, costMicrosPerStep: 5 }, { strategy: 'wait' });
    expect(result.execution.status).toBe('succeeded');
    expect(calls(api.sent)).toEqual(['POST /tools/test.sleep [wait=30]']);
  });

  it("'wait' keeps asking with Prefer, paced like polls when the server answers at once", async () => {
    let gets = 0;
    const started = Date.now();
    const { result, calls: c } = await run(() => json(200, { data: ++gets < 5 ? execution('running', 1) : execution('succeeded', 2) }), { strategy: 'wait' });
    expect(result).toMatchObject({ execution: { status: 'succeeded' } });
    expect(c.slice(1)).toEqual(Array(5).fill(`GET ${GET} [wait=30]`));
    expect(Date.now() - started).toBeGreaterThanOrEqual(4 * 10); // pollIntervalMs between the quick answers
  });

  it("'poll' neither streams nor sends Prefer", async () => {
    let gets = 0;
    const { result, calls: c } = await run(() => json(200, { data: ++gets < 3 ? execution('running', 1) : execution('succeeded', 2) }), { strategy: 'poll' });
    expect(result).toMatchObject({ execution: { status: 'succeeded' } });
    expect(c).toEqual(['POST /tools/test.sleep', `GET ${GET}`, `GET ${GET}`, `GET ${GET}`]);
  });

  it('an unknown strategy is refused before anything is sent', async () => {
    const api = fakeApi(() => apiError(500, 'INTERNAL', 'internal_error'));
    await expect(api.client.run(untyped('test.sleep'), {}, { strategy: 'sse' as RunOptions['strategy'] })).rejects.toThrow(
      /strategy must be one of auto, stream, wait, poll/,
    );
    expect(api.sent).toEqual([]);
  });

  it('an abort while streaming: TesAbortError naming the execution, the stream closed', async () => {
    let stream: AbortSignal | undefined;
    const controller = new AbortController();
    const { result } = await run(
      (_req, signal) => {
        stream = signal;
        return sse(signal, [event(1, execution('running', 1))], 'hang');
      },
      { signal: controller.signal, onProgress: (e) => e.status === 'running' && controller.abort(new Error('stop')) },
    );
    expect(result).toBeInstanceOf(TesAbortError);
    expect(result).toMatchObject({ executionId: ID });
    expect(stream?.aborted).toBe(true);
  });
});

describe('run(): the place in line', () => {
  const place = (e: Execution) => `${e.status} ${e.progress.queuePosition ?? '-'} ${e.progress.estimatedStartAt ?? '-'}`;

  it('every strategy hands onProgress the place in line while queued, and follows to the end when a server sends none', async () => {
    const start = '2026-11-26T15:00:12.000Z';
    const updates = [queued(3, start), queued(1, null), execution('running', 1), execution('succeeded', 2)];
    for (const strategy of ['stream', 'wait', 'poll'] as const) {
      let gets = 0;
      const seen: string[] = [];
      const { result } = await run(
        (req, signal) =>
          req.path === EVENTS
            ? sse(
                signal,
                updates.map((e, i) => event(i + 1, e)),
              )
            : json(200, { data: updates[Math.min(gets++, updates.length - 1)] }),
        { strategy, onProgress: (e) => seen.push(place(e)) },
      );
      expect(result).toMatchObject({ execution: { status: 'succeeded' } });
      expect(seen).toEqual(['queued - -', `queued 3 ${start}`, 'queued 1 -', 'running - -', 'succeeded - -']);
    }
  });
});
