import { context, isSpanContextValid, trace } from '@opentelemetry/api';

/** The ids that join a log line to its trace (the OpenTelemetry log data model's names). */
export interface TraceFields {
  trace_id?: string;
  span_id?: string;
}

const NONE: Readonly<TraceFields> = Object.freeze({});

/**
 * The active OpenTelemetry span's trace and span ids, for a log line written inside it: every
 * line of the logger carries them (a search for a trace id finds its lines). Empty outside a
 * span, and with tracing off: no context manager is registered then, `context.active()` is the
 * root context and this is one map lookup.
 */
export function traceFields(): Readonly<TraceFields> {
  const span = trace.getSpanContext(context.active());
  return span !== undefined && isSpanContextValid(span) ? { trace_id: span.traceId, span_id: span.spanId } : NONE;
}
