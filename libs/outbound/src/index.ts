export { addressRefusal, BlockedAddressError, checkDestination, endpointUrlProblem } from './address';
export * from './http';
export * from './webhook-signature';
