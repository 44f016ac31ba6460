/**
 * Jest config of `npm run test:faults`: the root config with testMatch narrowed to the long
 * outage suites (*.faults.ts), which the root config's `*.test.ts` never matches, so plain
 * `npm test` does not run them.
 */
const path = require('node:path');
const base = require('../../jest.config.js');

module.exports = {
  ...base,
  rootDir: path.resolve(__dirname, '../..'),
  roots: ['<rootDir>/tests/faults'],
  testMatch: ['<rootDir>/tests/faults/**/*.faults.ts'],
  testTimeout: 300_000,
  // one suite at a time: each runs its own Postgres, RabbitMQ node and services on 2 cores
  maxWorkers: 1,
};
