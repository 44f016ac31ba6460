export * from './http';
export * from './sleep';
export * from './webhook-signature';
