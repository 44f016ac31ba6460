export * from './embedded-s3';
export * from './database';
export * from './logs';
export * from './seed';
export * from './openapi';
export * from './processes';
export * from './tcp-relay';
export * from './use-database';
