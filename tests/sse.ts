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
  comments: string[];
  close(): void;
}

/** Opens a stream with fetch (no EventSource in Node 20) and parses it as the HTML spec says. */
export async function openEvents(url: string, headers: Record<string, string>): Promise<SseStream> {
  const abort = new AbortController();
  const started = Date.now();
  const res = await fetch(url, { headers: { Accept: 'text/event-stream', ...headers }, signal: abort.signal });
  const events: SseEvent[] = [];
  const comments: string[] = [];
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
    const decoder = new TextDecoder();
    let buffer = '';
    try {
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
        buffer += decoder.decode(chunk, { stream: true });
        let cut: number;
        while ((cut = buffer.indexOf('\n\n')) >= 0) {
          const block = buffer.slice(0, cut);
          buffer = buffer.slice(cut + 2);
          let event = 'message';
          let id: string | undefined;
          const data: string[] = [];
          for (const line of block.split('\n')) {
            if (line.startsWith(':')) comments.push(line.slice(1).trim());
            else if (line.startsWith('event:')) event = line.slice(6).trim();
            else if (line.startsWith('id:')) id = line.slice(3).trim();
            else if (line.startsWith('data:')) data.push(line.slice(5).trimStart());
          }
          if (data.length > 0) {
            events.push({ event, id, data: JSON.parse(data.join('\n')) as Record<string, unknown>, atMs: Date.now() - started });
            wake();
          }
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
    comments,
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
