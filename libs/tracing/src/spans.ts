import {
  context,
  propagation,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Context,
  type Span,
  type TextMapGetter,
  type Tracer,
} from '@opentelemetry/api';

/**
 * The spans of a process, through the OpenTelemetry API. Off (the default) every helper here is
 * one `undefined` check and then the wrapped function itself: no span, no context, no carrier
 * object. On, `startTracing` (./start.ts, the only importer of the SDK) has registered the SDK as
 * the API's global provider and set `active` here.
 *
 * `active` is this library's one piece of module state, a mirror of the API's own global: the
 * OpenTelemetry API is a process-wide registry by design (any library's spans land in the
 * provider registered there), so a tracer passed down through every option object would buy
 * nothing but edits in every file on the way.
 */
let active: Tracer | undefined;

/** Set by startTracing (and cleared by its stop): spans are recorded from now on. */
export function setTracer(tracer: Tracer | undefined): void {
  active = tracer;
}

/** Whether spans are recorded in this process (OTEL_EXPORTER_OTLP_ENDPOINT was set). */
export function tracingOn(): boolean {
  return active !== undefined;
}

/** What a wrapped function may do with its span: add attributes (never secrets, payloads or URLs). */
export type SpanHandle = Pick<Span, 'setAttribute' | 'setAttributes'>;

const NO_SPAN: SpanHandle = {
  setAttribute() {
    return this as Span;
  },
  setAttributes() {
    return this as Span;
  },
};

/**
 * Runs `fn` in a span named `name`, a child of the active span (or a root), and ends it when
 * `fn` settles. A rejection marks the span as an error with the error's code or class name
 * only: messages may carry what a trace must not (a path, a provider's answer).
 */
export function withSpan<T>(name: string, fn: (span: SpanHandle) => Promise<T>, attributes?: Attributes, kind: SpanKind = SpanKind.INTERNAL): Promise<T> {
  const tracer = active;
  if (tracer === undefined) return fn(NO_SPAN);
  return tracer.startActiveSpan(name, { kind, attributes }, (span) => runInSpan(span, fn));
}

async function runInSpan<T>(span: Span, fn: (span: SpanHandle) => Promise<T>): Promise<T> {
  try {
    return await fn(span);
  } catch (err) {
    const type = errorType(err);
    span.setAttribute('error.type', type);
    span.setStatus({ code: SpanStatusCode.ERROR, message: type });
    throw err;
  } finally {
    span.end();
  }
}

function errorType(err: unknown): string {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === 'string') return code;
  return err instanceof Error ? err.name : typeof err;
}

/** Adds attributes to the active span, if any (a step's units and cost, once they are known). */
export function annotate(attributes: Attributes): void {
  if (active === undefined) return;
  trace.getActiveSpan()?.setAttributes(attributes);
}

/**
 * The W3C traceparent of the active span, for a row that outlives this process's context (the
 * outbox: whoever publishes the row continues the trace). Null when off or with no span.
 */
export function currentTraceparent(): string | null {
  if (active === undefined) return null;
  const carrier: Record<string, string> = {};
  propagation.inject(context.active(), carrier);
  return carrier.traceparent ?? null;
}

/** AMQP header values arrive as strings or Buffers (amqplib's longstr); anything else is not ours. */
const amqpGetter: TextMapGetter<Record<string, unknown>> = {
  keys: (carrier) => Object.keys(carrier),
  get: (carrier, key) => {
    const v = carrier[key];
    if (typeof v === 'string') return v;
    if (Buffer.isBuffer(v)) return v.toString('utf8');
    return undefined;
  },
};

function parentFrom(headers: Record<string, unknown> | undefined): Context {
  return headers ? propagation.extract(ROOT_CONTEXT, headers, amqpGetter) : ROOT_CONTEXT;
}

/**
 * A publish: a PRODUCER span, child of `traceparent` when given (an outbox row's, published by
 * the gateway or by the relay long after) or else of the active span (a worker's delayed
 * re-publish), and `fn` gets the headers that carry this span to the consumer. Off, `fn` gets
 * undefined.
 */
export function withPublishSpan<T>(
  name: string,
  traceparent: string | null | undefined,
  fn: (headers: Record<string, string> | undefined) => Promise<T>,
  attributes?: Attributes,
): Promise<T> {
  if (active === undefined) return fn(undefined);
  const parent = traceparent ? parentFrom({ traceparent }) : context.active();
  return context.with(parent, () =>
    withSpan(
      name,
      () => {
        const headers: Record<string, string> = {};
        propagation.inject(context.active(), headers);
        return fn(headers);
      },
      attributes,
      SpanKind.PRODUCER,
    ),
  );
}

/**
 * Handling a message: a CONSUMER span whose parent is the publish its headers name (a root when
 * they name none), so the worker's spans join the trace of the request that queued the work.
 */
export function withMessageSpan<T>(name: string, headers: Record<string, unknown> | undefined, fn: () => Promise<T>, attributes?: Attributes): Promise<T> {
  if (active === undefined) return fn();
  return context.with(parentFrom(headers), () => withSpan(name, fn, attributes, SpanKind.CONSUMER));
}

/**
 * An Express middleware body for the HTTP server span: a SERVER span per request, ended on the
 * response's `close` with its status and named `METHOD /route/{template}` by what `route`
 * returns then (the method alone for a path no route matched). Installed only when tracing is
 * on, so a gateway without it pays nothing.
 */
export function serverSpan(
  req: { method: string },
  res: { statusCode: number; once(event: 'close', cb: () => void): unknown },
  next: () => void,
  route: () => string | undefined = () => undefined,
): void {
  const tracer = active;
  if (tracer === undefined) return next();
  const span = tracer.startSpan(req.method, { kind: SpanKind.SERVER, attributes: { 'http.request.method': req.method } });
  res.once('close', () => {
    const template = route();
    if (template !== undefined) {
      span.updateName(`${req.method} ${template}`);
      span.setAttribute('http.route', template);
    }
    span.setAttribute('http.response.status_code', res.statusCode);
    if (res.statusCode >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
    span.end();
  });
  context.with(trace.setSpan(context.active(), span), next);
}
