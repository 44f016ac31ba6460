/**
 * Jest config of `npm run soak`: the root config narrowed to the soak (*.soak.ts), which
 * neither `npm test` (*.test.ts) nor `npm run test:faults` (*.faults.ts) matches. The
 * duration comes from SOAK_ARGS (`npm run soak -- --minutes 3`, passed by the npm script,
 * since jest refuses unknown options) or SOAK_MINUTES; the test sets its own timeout from it.
 */
const path = require('node:path');
const base = require('../../jest.config.js');

module.exports = {
  ...base,
  rootDir: path.resolve(__dirname, '../..'),
  roots: ['<rootDir>/tests/faults'],
  testMatch: ['<rootDir>/tests/faults/**/*.soak.ts'],
  // one process: its own Postgres, RabbitMQ node and four services on 2 shared cores
  maxWorkers: 1,
};
