export { addressRefusal, BlockedAddressError, checkDestination } from './address';
export * from './http';
export * from './webhook-signature';
