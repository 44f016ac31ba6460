export { addressRefusal, BlockedAddressError, checkDestination } from './address';
export * from './http';
export * from './sleep';
export * from './webhook-signature';
