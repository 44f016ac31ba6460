export { addressRefusal, BlockedAddressError, checkDestination, endpointUrlProblem } from './address';
export * from './http';
export * from './sleep';
export * from './webhook-signature';
