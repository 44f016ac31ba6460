import http from 'node:http';
import pg from 'pg';
import { SseParser } from '@tes/client';
import { EXECUTION_CHANGES_CHANNEL } from '@tes/db';

/**
 * The client side of B7-B9, shared by the push children: JSON requests, a Server-Sent Events
 * reader, and a raw LISTEN on the channel the database triggers notify (the floor every push
 * latency is printed next to). Every arrival is stamped with `nowMs()`: wall-clock milliseconds
 * with a fraction, comparable with the timestamps Postgres writes, as both read this machine's clock.
 */
export const nowMs = (): number => performance.timeOrigin + performance.now();

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Nearest-rank quantile (q in 0..1) of unsorted values; NaN for none. */
export function quantile(values: readonly number[], q: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!;
}

export interface JsonAnswer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: { data?: Record<string, unknown>; error?: unknown };
  /** When the whole answer had arrived. */
  at: number;
}

const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });

/** One JSON request to the gateway (127.0.0.1) with an API key; 10 s more than any wait it asks for. */
export function requestJson(
  base: URL,
  method: 'GET' | 'POST',
  path: string,
  secret: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<JsonAnswer> {
  const payload = body === undefined ? undefined : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        agent,
        host: base.hostname,
        port: base.port,
        method,
        path,
        timeout: 70_000,
        headers: {
          authorization: `Bearer ${secret}`,
          ...(payload ? { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(payload)) } : {}),
          ...headers,
        },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () => {
          const at = nowMs();
          try {
            resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text ? (JSON.parse(text) as JsonAnswer['body']) : {}, at });
          } catch {
            reject(new Error(`${method} ${path}: ${res.statusCode} not JSON: ${text.slice(0, 200)}`));
          }
        });
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`${method} ${path}: timed out`)));
    req.on('error', reject);
    req.end(payload);
  });
}

export interface SseEvent {
  /** Arrival (nowMs) of the event's last byte. */
  at: number;
  id: string | undefined;
  event: string;
  data: string;
}

export interface EventStream {
  readonly events: SseEvent[];
  /** Resolves when the first event arrived (rejects if the stream failed first). */
  readonly first: Promise<void>;
  /** Resolves when the stream ends: 'end' (the server closed it), 'error' (refused or broken), 'closed' (by us). */
  readonly ended: Promise<'end' | 'error' | 'closed'>;
  status(): number;
  close(): void;
}

/**
 * GET `path` as text/event-stream on a connection of its own (no pooling: a stream holds its
 * socket), parsing events as they come; `onEvent` sees each one at its arrival.
 */
export function openEventStream(base: URL, path: string, secret: string, onEvent?: (e: SseEvent) => void): EventStream {
  const events: SseEvent[] = [];
  let status = 0;
  let closedByUs = false;
  let gotFirst!: () => void;
  let failFirst!: (err: Error) => void;
  const first = new Promise<void>((resolve, reject) => ((gotFirst = resolve), (failFirst = reject)));
  first.catch(() => undefined); // a caller that never awaits it must not see an unhandled rejection
  let finish!: (how: 'end' | 'error' | 'closed') => void;
  const ended = new Promise<'end' | 'error' | 'closed'>((resolve) => (finish = resolve));
  const req = http.get(
    { host: base.hostname, port: base.port, path, agent: false, headers: { authorization: `Bearer ${secret}`, accept: 'text/event-stream' } },
    (res) => {
      status = res.statusCode ?? 0;
      if (status !== 200) {
        res.resume();
        failFirst(new Error(`${path}: HTTP ${status}`));
        return finish('error');
      }
      const parser = new SseParser();
      res.on('data', (chunk: Buffer) => {
        for (const parsed of parser.push(chunk)) {
          const e: SseEvent = { at: nowMs(), id: parsed.lastEventId || undefined, event: parsed.type, data: parsed.data };
          events.push(e);
          if (events.length === 1) gotFirst();
          onEvent?.(e);
        }
      });
      res.on('end', () => {
        failFirst(new Error(`${path}: ended before its first event`));
        finish(closedByUs ? 'closed' : 'end');
      });
      res.on('error', () => finish(closedByUs ? 'closed' : 'error'));
    },
  );
  req.on('error', (err) => {
    failFirst(err);
    finish(closedByUs ? 'closed' : 'error');
  });
  return {
    events,
    first,
    ended,
    status: () => status,
    close: () => {
      closedByUs = true;
      req.destroy();
    },
  };
}

/**
 * A raw `LISTEN` on the triggers' channel from a connection of the harness's own: when each
 * execution's notifications arrived here. A notification is delivered when its transaction
 * commits, so commit → this arrival is the least any push path built on it can take.
 */
export class NotifyLog {
  readonly arrivals = new Map<string, number[]>();
  private readonly client: pg.Client;

  constructor(databaseUrl: string) {
    this.client = new pg.Client({ connectionString: databaseUrl, application_name: 'tes-bench-listen' });
    this.client.on('notification', (n) => {
      const at = nowMs();
      if (n.channel !== EXECUTION_CHANGES_CHANNEL || !n.payload) return;
      const list = this.arrivals.get(n.payload);
      if (list) list.push(at);
      else this.arrivals.set(n.payload, [at]);
    });
  }

  async start(): Promise<void> {
    await this.client.connect();
    await this.client.query(`LISTEN ${EXECUTION_CHANGES_CHANNEL}`);
  }

  async stop(): Promise<void> {
    await this.client.end().catch(() => undefined);
  }
}

/** The timestamps (ms) a public execution object carries: its own start and end, each step's. */
export function changeTimes(execution: Record<string, unknown>): number[] {
  const steps = (execution.steps as { startedAt?: string | null; finishedAt?: string | null }[] | undefined) ?? [];
  const raw = [execution.startedAt, execution.finishedAt, ...steps.flatMap((s) => [s.startedAt, s.finishedAt])];
  return raw.filter((v): v is string => typeof v === 'string').map((v) => Date.parse(v));
}
