export * from './stop';
export * from './shutdown';
export * from './startup';
export * from './run-service';
export * from './crash-point';
