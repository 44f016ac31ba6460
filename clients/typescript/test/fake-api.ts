import { TesClient, type Execution, type FetchLike } from '../src';

/**
 * A scripted stand-in for the gateway, as a fetch function: for the client's own transport
 * logic (reconnects, fallbacks) on answers the real gateway cannot be made to give on demand
 * — a proxy that buffers, an older gateway without the stream, a server that ignores
 * `Prefer`. Everything the real gateway does is tested end to end in *.e2e.test.ts.
 */
export interface Sent {
  method: string;
  path: string;
  headers: Headers;
}

export type Handler = (req: Sent, signal: AbortSignal) => Response | Promise<Response>;

const BASE_URL = 'http://tes.test';

/**
 * A tool name typed as a plain `string`: the SDK's untyped call (a tool newer than
 * tool-types.ts), for tests that send arguments only the server refuses.
 */
export function untyped(name: string): string {
  return name;
}
export const ID = 'exe_01JD3Z8X4V6W2Q9R7T5Y1M3N8K';

export function execution(status: Execution['status'], completedSteps = 0, totalSteps = 2): Execution {
  return {
    id: ID,
    tool: 'test.sleep',
    model: 'sleep',
    status,
    arguments: {},
    priceVersion: 'v1',
    reservedMicros: 10,
    chargedMicros: status === 'succeeded' ? 10 : 0,
    currency: 'usd',
    cancelRequested: false,
    progress: { completedSteps, totalSteps, currentStep: status === 'running' ? `sleep_${completedSteps}` : null },
    steps: [],
    output: status === 'succeeded' ? { artifacts: [] } : null,
    errorCode: null,
    errorMessage: null,
    createdAt: '2026-11-23T00:00:00.000Z',
    startedAt: null,
    finishedAt: null,
  } as unknown as Execution;
}

/**
 * A queued execution with its place in line, as a server with the fair-share order reports it
 * (`estimatedStartAt` null: the server has no recent start rate to estimate from).
 */
export function queued(queuePosition: number, estimatedStartAt: string | null = null): Execution {
  const e = execution('queued');
  return { ...e, progress: { ...e.progress, queuePosition, estimatedStartAt } };
}

export function json(status: number, body: unknown, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json', ...headers } });
}

export const apiError = (status: number, errorStatus: string, message: string, headers: Record<string, string> = {}): Response =>
  json(status, { error: { status: errorStatus, message } }, headers);

export function event(id: number, e: Execution): string {
  return `event: execution\nid: ${id}\ndata: ${JSON.stringify(e)}\n\n`;
}

/**
 * A text/event-stream answer: the parts are sent in order (a number is a pause in ms), then
 * the stream ends as `end` says — closed by the server, dropped mid-way (a network error),
 * or left open until the client aborts.
 */
export function sse(
  signal: AbortSignal,
  parts: (string | number)[],
  end: 'close' | 'drop' | 'hang' = 'close',
  contentType = 'text/event-stream; charset=utf-8',
): Response {
  const queue = [...parts];
  // pull(): a part is handed over only when the client reads, so the client has read every
  // part before the end comes (error() would throw away chunks still queued).
  const body = new ReadableStream<Uint8Array>(
    {
      start(controller) {
        signal.addEventListener('abort', () => {
          try {
            controller.error(signal.reason);
          } catch {
            // already closed
          }
        });
      },
      async pull(controller) {
        for (let p = queue.shift(); p !== undefined; p = queue.shift()) {
          if (typeof p === 'number') {
            await new Promise((r) => setTimeout(r, p));
            continue;
          }
          controller.enqueue(new TextEncoder().encode(p));
          return;
        }
        if (end === 'close') controller.close();
        if (end === 'drop') controller.error(new TypeError('terminated', { cause: new Error('other side closed') }));
        if (end === 'hang') await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve()));
      },
    },
    { highWaterMark: 0 },
  );
  return new Response(body, { status: 200, headers: { 'Content-Type': contentType } });
}

export function fakeApi(handler: Handler): { client: TesClient; sent: Sent[]; fetch: FetchLike } {
  const sent: Sent[] = [];
  const fetch: FetchLike = async (input, init) => {
    const url = new URL(input);
    const req: Sent = { method: init.method ?? 'GET', path: url.pathname, headers: new Headers(init.headers) };
    sent.push(req);
    const signal = init.signal ?? new AbortController().signal;
    signal.throwIfAborted();
    return handler(req, signal);
  };
  const client = new TesClient({
    apiKey: 'tes_abcdefgh_0123456789abcdefghijABCDEFGHIJ',
    baseUrl: BASE_URL,
    fetch,
    pollIntervalMs: 10,
    retry: { baseDelayMs: 1, maxDelayMs: 5 },
  });
  return { client, sent, fetch };
}

/** Quote and submit answers for run(); the submit is a 202 queued (or what `submit` returns). */
export function runRoutes(req: Sent, submit: () => Response = () => json(202, { data: execution('queued') }, { 'Retry-After': '0' })): Response | undefined {
  if (req.method === 'POST' && req.path === '/tools/quote') {
    return json(200, {
      data: {
        tool: 'test.sleep',
        model: 'sleep',
        priceVersion: 'v1',
        currency: 'usd',
        minimumChargeMicros: 0,
        maximumChargeMicros: 10,
        unit: 'step',
        estimatedUnits: 2,
      },
    });
  }
  if (req.method === 'POST' && req.path === '/tools/test.sleep') return submit();
  return undefined;
}
