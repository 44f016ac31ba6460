import type { Request, Response } from 'express';
import type { Histogram } from 'prom-client';
import { logFields, type Logger } from '@tes/observability';
import type { AuthContext } from './context';

/** The metrics' route label of a request that matched no route template (a truly unknown path). */
const UNMATCHED = 'unmatched';

/** What the gateway learns about a request while answering it, for its access-log line. */
interface Answered {
  /** The OpenAPI route template (`/tools/executions/{id}`), once the path matched one. */
  route?: string;
  /** The error envelope's `error.message` (its code), when the answer is an error. */
  errorCode?: string;
  /** A 5xx the gateway gives by design (load shedding, a switch turned off), not a failure. */
  refusal?: boolean;
}

const answered = new WeakMap<Response, Answered>();

/**
 * Marks a 503 the gateway answers on purpose: more uploads at once than it takes (what clients
 * cause), execution switched off. Its line is written at warn, so the error level holds only
 * what an operator must look at (a failure of ours or of a dependency).
 */
export function markRefusal(res: Response): void {
  const a = answered.get(res);
  if (a) a.refusal = true;
  else answered.set(res, { refusal: true });
}

/** Records the route template the request matched (the metrics' label and the log's `route`). */
export function markRoute(res: Response, route: string): void {
  const a = answered.get(res);
  if (a) a.route = route;
  else answered.set(res, { route });
}

/** The route template the request matched, if it matched one (the trace's server span is named by it). */
export function routeOf(res: Response): string | undefined {
  return answered.get(res)?.route;
}

/** Records the error code the answer carries. */
export function markError(res: Response, code: string): void {
  const a = answered.get(res);
  if (a) a.errorCode = code;
  else answered.set(res, { errorCode: code });
}

/**
 * One structured line per request (`gateway.http.request`, at info; a 5xx at error, or at warn
 * when it was a refusal by design, markRefusal) and the
 * request-duration histogram, both written when the answer is finished (or the client went
 * away first). The line holds ids and numbers only: the request id, method, route template
 * (never the raw path, whose query string may carry anything), status, duration, the key id
 * and project id once authenticated, the bytes written to the socket (headers included) and
 * the error code; with tracing on, as every line written in a span, the request's trace_id and
 * span_id. Never the key, a body, a query string or a URL.
 *
 * `sample` (ACCESS_LOG_SAMPLE) is the share of successful answers (status < 400) written;
 * refusals and errors are always written, so a request id quoted from an error is always found.
 *
 * Cost: the histogram's children are cached per (method, route, status), so an observation
 * does not hash its label set; the line is written by logFields (same JSON, same redaction,
 * same transports as logger.log, without winston's stream and format chain: ≈ 4 µs instead
 * of ≈ 8–11 µs a line), and the default stdout transport writes a loop turn's lines at once.
 */
export class AccessLog {
  private readonly children = new Map<string, ReturnType<Histogram<'method' | 'route' | 'status'>['labels']>>();

  constructor(
    private readonly logger: Logger,
    private readonly histogram: Histogram<'method' | 'route' | 'status'>,
    private readonly sample: number,
  ) {}

  /** Starts timing `req`; the line and the observation follow its end. */
  begin(req: Request, res: Response, requestId: string): void {
    const started = process.hrtime.bigint();
    const socket = req.socket;
    const writtenBefore = socket.bytesWritten;
    // 'close' alone: a response emits it once, after 'finish' when the answer was complete
    // (writableFinished) and on its own when the client went away first
    const end = (): void => {
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      const a = answered.get(res);
      const route = a?.route ?? UNMATCHED;
      const status = res.statusCode;
      const finished = res.writableFinished;
      // as before the access log: an answer the client did not wait for (an event stream it
      // closed, a wait it gave up) is not a latency; it is still logged, marked aborted
      if (finished) this.child(req.method, route, status).observe(seconds);
      if (status < 400 && this.sample < 1 && !(Math.random() < this.sample)) return;
      const level = status < 500 ? 'info' : a?.refusal ? 'warn' : 'error';
      if (!this.logger.isLevelEnabled(level)) return;
      const auth = res.locals.auth as AuthContext | undefined;
      logFields(this.logger, level, 'gateway.http.request', {
        requestId,
        method: req.method,
        route,
        status,
        durationMs: Math.round(seconds * 1e4) / 10,
        keyId: auth?.keyId,
        projectId: auth?.projectId,
        bytesSent: socket.bytesWritten - writtenBefore,
        errorCode: a?.errorCode,
        // the client went away before the answer was complete
        aborted: finished ? undefined : true,
      });
    };
    res.once('close', end);
  }

  private child(method: string, route: string, status: number) {
    const key = `${method} ${route} ${status}`;
    let child = this.children.get(key);
    if (!child) {
      child = this.histogram.labels(method, route, String(status));
      // bounded: methods Node accepts × route templates × status codes; past that, no caching
      if (this.children.size < 2_000) this.children.set(key, child);
    }
    return child;
  }
}
