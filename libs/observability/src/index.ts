export * from './logger';
export { flushLogs } from './stdout-transport';
export * from './metrics';
export * from './health-server';
export { traceFields, type TraceFields } from './trace-context';
