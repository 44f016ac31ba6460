export { annotate, currentTraceparent, serverSpan, tracingOn, withMessageSpan, withPublishSpan, withSpan, type SpanHandle } from './spans';
export { withTracing, type TracingSettings } from './start';
