import { NotFoundError, PermissionDeniedError, StreamUnavailableError, TesNetworkError, type Execution } from '../src';
import { ID, apiError, event, execution, fakeApi, json, queued, sse } from './fake-api';

/**
 * client.events(): reconnects and their bounds, against a scripted fetch (fake-api.ts). The
 * stream of the real gateway, across a restart, is in sdk.e2e.test.ts.
 */
const EVENTS = `/tools/executions/${ID}/events`;

async function collect(iterable: AsyncIterable<Execution>): Promise<string[]> {
  const seen: string[] = [];
  for await (const e of iterable) seen.push(`${e.status} ${e.progress.completedSteps}`);
  return seen;
}

describe('client.events', () => {
  it('yields every event, also one with the id of the last: a queued execution moving up keeps its version', async () => {
    const { client } = fakeApi((_req, signal) =>
      sse(signal, [event(4, queued(3, '2026-11-26T15:00:40.000Z')), event(4, queued(2, '2026-11-26T15:00:38.000Z')), event(5, execution('succeeded', 2))]),
    );
    const seen: string[] = [];
    for await (const e of client.events(ID)) seen.push(`${e.status} ${e.progress.queuePosition ?? '-'} ${e.progress.estimatedStartAt ?? '-'}`);
    expect(seen).toEqual(['queued 3 2026-11-26T15:00:40.000Z', 'queued 2 2026-11-26T15:00:38.000Z', 'succeeded - -']);
  });

  it('resumes with Last-Event-ID after a dropped connection, and ends after the terminal event without waiting for the close', async () => {
    let opens = 0;
    const { client, sent } = fakeApi((req, signal) => {
      opens++;
      if (opens === 1) return sse(signal, ['retry: 5\n\n', event(1, execution('queued')), ': keep-alive\n\n', event(2, execution('running', 1))], 'drop');
      return sse(signal, [event(3, execution('succeeded', 2))], 'hang');
    });
    const stream = client.events(ID);
    expect(await collect(stream)).toEqual(['queued 0', 'running 1', 'succeeded 2']);
    expect(stream.lastEventId).toBe('3');
    expect(sent.map((s) => [s.path, s.headers.get('last-event-id'), s.headers.get('accept')])).toEqual([
      [EVENTS, null, 'text/event-stream'],
      [EVENTS, '2', 'text/event-stream'],
    ]);
    expect(sent[0]!.headers.get('authorization')).toMatch(/^Bearer tes_/);
  });

  it('a clean end before the terminal event is resumed; a resumed stream that ends at once is settled with a GET', async () => {
    const { client, sent } = fakeApi((req, signal) => {
      if (req.path === `/tools/executions/${ID}`) return json(200, { data: execution('succeeded', 2) });
      // the first connection ends early (a gateway that stops); the second has nothing to say
      return sse(signal, sent.filter((s) => s.path === EVENTS).length === 1 ? ['retry: 1\n\n', event(5, execution('running', 1))] : ['retry: 1\n\n']);
    });
    expect(await collect(client.events(ID))).toEqual(['running 1', 'succeeded 2']);
    expect(sent.map((s) => `${s.path} ${s.headers.get('last-event-id') ?? '-'}`)).toEqual([`${EVENTS} -`, `${EVENTS} 5`, `/tools/executions/${ID} -`]);
  });

  it("starts from the caller's lastEventId", async () => {
    const { client, sent } = fakeApi((_req, signal) => sse(signal, [event(9, execution('failed', 1))]));
    expect(await collect(client.events(ID, { lastEventId: '8' }))).toEqual(['failed 1']);
    expect(sent[0]!.headers.get('last-event-id')).toBe('8');
  });

  it('a 4xx is thrown at once, never retried', async () => {
    for (const [status, errorStatus, code, type] of [
      [403, 'PERMISSION_DENIED', 'platform_api_key_scope_required', PermissionDeniedError],
      [404, 'NOT_FOUND', 'route_not_found', NotFoundError],
    ] as const) {
      const { client, sent } = fakeApi(() => apiError(status, errorStatus, code));
      const err = await collect(client.events(ID)).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(type);
      expect(err).toMatchObject({ code, status });
      expect(sent).toHaveLength(1);
    }
  });

  it('5xx answers and refused connections are retried with backoff, at most retry.maxReconnects times', async () => {
    let n = 0;
    const { client, sent } = fakeApi(() => {
      if (n++ % 2 === 0) return apiError(503, 'UNAVAILABLE', 'service_unavailable');
      throw new TypeError('fetch failed', { cause: new Error('connect ECONNREFUSED') });
    });
    const err = await collect(client.events(ID)).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TesNetworkError);
    expect((err as Error).message).toContain('no event after 8 connections');
    expect(sent).toHaveLength(8);
  }, 20_000);

  it('a rate-limit 429 is waited out per Retry-After, like every request', async () => {
    let n = 0;
    const { client, sent } = fakeApi((_req, signal) =>
      n++ === 0 ? apiError(429, 'RESOURCE_EXHAUSTED', 'rate_limit_exceeded', { 'Retry-After': '0' }) : sse(signal, [event(1, execution('succeeded', 2))]),
    );
    expect(await collect(client.events(ID))).toEqual(['succeeded 2']);
    expect(sent).toHaveLength(2);
  });

  it('a connection silent for idleTimeoutMs (not even a keep-alive) is dropped and resumed', async () => {
    const { client, sent } = fakeApi((_req, signal) =>
      sent.length === 1
        ? sse(signal, ['retry: 1\n\n', event(1, execution('running', 1)), ': keep-alive\n\n'], 'hang')
        : sse(signal, [event(2, execution('succeeded', 2))]),
    );
    const started = Date.now();
    expect(await collect(client.events(ID, { idleTimeoutMs: 150 }))).toEqual(['running 1', 'succeeded 2']);
    expect(Date.now() - started).toBeGreaterThanOrEqual(140);
    expect(sent[1]!.headers.get('last-event-id')).toBe('1');
  });

  it("an answer that is not text/event-stream (a proxy's page) is a StreamUnavailableError", async () => {
    const { client, sent } = fakeApi((_req, signal) => sse(signal, ['<html>hello</html>'], 'close', 'text/html'));
    await expect(collect(client.events(ID))).rejects.toBeInstanceOf(StreamUnavailableError);
    expect(sent).toHaveLength(1);
  });

  it("the caller's signal stops it with its reason, and the connection is closed", async () => {
    let connection: AbortSignal | undefined;
    const { client } = fakeApi((_req, signal) => {
      connection = signal;
      return sse(signal, [event(1, execution('running', 1))], 'hang');
    });
    const controller = new AbortController();
    const seen: string[] = [];
    const err = await (async () => {
      for await (const e of client.events(ID, { signal: controller.signal })) {
        seen.push(e.status);
        controller.abort(new Error('enough'));
      }
    })().catch((e: unknown) => e);
    expect(seen).toEqual(['running']);
    expect((err as Error).message).toBe('enough');
    expect(connection?.aborted).toBe(true);
  });

  it('is iterated once', async () => {
    const { client } = fakeApi((_req, signal) => sse(signal, [event(1, execution('succeeded', 2))]));
    const stream = client.events(ID);
    await collect(stream);
    expect(() => stream[Symbol.asyncIterator]()).toThrow(TypeError);
  });
});
