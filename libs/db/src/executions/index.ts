export * from './records';
export * from './submit';
export * from './lease';
export * from './steps';
export * from './settle';
export * from './public';
export * from './fair-share';
