export * from './topology';
export * from './connection';
export * from './publisher';
export * from './consumer';
