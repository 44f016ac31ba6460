export * from './topology';
export * from './connection';
export * from './publisher';
export * from './consumer';
export * from './dispatcher';
