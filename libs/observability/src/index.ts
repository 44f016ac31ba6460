export * from './logger';
export * from './metrics';
export * from './health-server';
export * from './shutdown';
export * from './run-service';
export * from './crash-point';
