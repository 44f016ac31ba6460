export * from './logger';
export { flushLogs } from './stdout-transport';
export * from './metrics';
export * from './health-server';
