// The SDK's parser, from its source: the SDK's entry is CommonJS for Node, which Vite does not
// bundle from a linked workspace; sse.ts imports nothing.
import { SseParser, type SseEvent } from '../../typescript/src/sse';
import { ApiError, TERMINAL, type Api, type Execution } from './api';

/**
 * Follows an execution until it is terminal, calling `onChange` with every state it sees.
 *
 * EventSource cannot send an Authorization header, so the event stream
 * (GET /tools/executions/{id}/events) is read with fetch() and a streaming reader. A stream
 * that ends early is resumed with Last-Event-ID; a stream that cannot be opened falls back to
 * long polls (`Prefer: wait=30`). Resolves with the last state; rejects with an ApiError the
 * caller shows, or with the signal's reason when aborted.
 */
export async function followExecution(api: Api, id: string, onChange: (e: Execution) => void, signal: AbortSignal): Promise<Execution> {
  let last: Execution | undefined;
  let lastEventId: string | undefined;
  const seen = (e: Execution) => {
    last = e;
    onChange(e);
  };
  for (let attempt = 0; attempt < 5 && !signal.aborted; attempt++) {
    const headers: Record<string, string> = { Accept: 'text/event-stream' };
    if (lastEventId) headers['Last-Event-ID'] = lastEventId;
    const res = await api.send('GET', `/tools/executions/${encodeURIComponent(id)}/events`, { headers, signal });
    if (!res.ok || !res.body || !res.headers.get('content-type')?.startsWith('text/event-stream')) {
      if (res.status === 404) throw await errorOf(res);
      await res.body?.cancel();
      break; // no stream here: poll instead
    }
    for await (const event of sseEvents(res.body, signal)) {
      if (event.lastEventId) lastEventId = event.lastEventId;
      if (event.type !== 'execution') continue;
      seen(JSON.parse(event.data) as Execution);
    }
    if (last && TERMINAL.includes(last.status)) return last;
  }
  // Fallback: long polls, each answered as soon as the execution ends (or after 30 s).
  for (;;) {
    signal.throwIfAborted();
    const { body } = await api.call<{ data: Execution }>('GET', `/tools/executions/${encodeURIComponent(id)}`, {
      headers: { Prefer: 'wait=30' },
      signal,
    });
    seen(body.data);
    if (TERMINAL.includes(body.data.status)) return body.data;
  }
}

async function errorOf(res: Response): Promise<ApiError> {
  try {
    const body = (await res.json()) as { error: ApiError['body'] };
    return new ApiError(res.status, body.error, res.headers.get('x-request-id'));
  } catch {
    return new ApiError(res.status, { status: 'UNKNOWN', message: 'unexpected_response' }, res.headers.get('x-request-id'));
  }
}

/** The events of a text/event-stream body, parsed by the SDK's parser (the HTML standard's rules). */
async function* sseEvents(body: ReadableStream<Uint8Array>, signal: AbortSignal): AsyncGenerator<SseEvent> {
  const reader = body.getReader();
  const parser = new SseParser();
  const stop = () => void reader.cancel().catch(() => undefined);
  signal.addEventListener('abort', stop, { once: true });
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      yield* parser.push(value);
    }
  } finally {
    signal.removeEventListener('abort', stop);
    reader.releaseLock();
  }
}
