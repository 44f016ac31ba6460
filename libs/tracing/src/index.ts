export { annotate, currentTraceparent, httpRoute, serverSpan, tracingOn, withMessageSpan, withPublishSpan, withSpan, type SpanHandle } from './spans';
export { withTracing, type TracingSettings } from './start';
