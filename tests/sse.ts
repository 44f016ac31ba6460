import { SseParser } from '@tes/client';

/** A Server-Sent Events reader for tests: the events of one GET, with the time each arrived. */
export interface SseEvent {
  event: string;
  id: string | undefined;
  data: Record<string, unknown>;
  atMs: number;
}

export interface SseStream {
  status: number;
  headers: Headers;
  /** Events so far; grows while the stream is open. */
  events: SseEvent[];
  /** Resolves when the server ends the stream (or it is aborted). */
  ended: Promise<void>;
  /** Resolves once `n` events have arrived. */
  next(n: number, timeoutMs?: number): Promise<SseEvent[]>;
  close(): void;
}

/** Opens a stream with fetch (no EventSource in Node 20) and parses it with the SDK's parser. */
export async function openEvents(url: string, headers: Record<string, string>): Promise<SseStream> {
  const abort = new AbortController();
  const started = Date.now();
  const res = await fetch(url, { headers: { Accept: 'text/event-stream', ...headers }, signal: abort.signal });
  const events: SseEvent[] = [];
  const waiters: { n: number; resolve: () => void }[] = [];
  const wake = () => {
    for (const w of [...waiters])
      if (events.length >= w.n) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve();
      }
  };
  const ended = (async () => {
    if (!res.body || res.status !== 200) return;
    const parser = new SseParser();
    try {
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
        for (const e of parser.push(chunk)) {
          events.push({ event: e.type, id: e.lastEventId || undefined, data: JSON.parse(e.data) as Record<string, unknown>, atMs: Date.now() - started });
          wake();
        }
      }
    } catch (err) {
      if (!abort.signal.aborted) throw err;
    }
  })();
  return {
    status: res.status,
    headers: res.headers,
    events,
    ended,
    next: (n, timeoutMs = 15_000) =>
      new Promise((resolve, reject) => {
        if (events.length >= n) return resolve(events);
        const timer = setTimeout(() => reject(new Error(`only ${events.length} of ${n} events after ${timeoutMs} ms`)), timeoutMs);
        waiters.push({
          n,
          resolve: () => {
            clearTimeout(timer);
            resolve(events);
          },
        });
        void ended.then(() => {
          if (events.length < n) {
            clearTimeout(timer);
            reject(new Error(`the stream ended after ${events.length} of ${n} events`));
          }
        });
      }),
    close: () => abort.abort(),
  };
}
