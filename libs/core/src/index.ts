export * from './ids';
export * from './errors';
export * from './states';
export * from './money';
export * from './canonical';
export * from './api-keys';
export * from './media';
export * from './file-facts';
