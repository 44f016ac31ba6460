/** @type {import('jest').Config} */
const path = require('node:path');

const libs = ['boot', 'core', 'config', 'observability', 'lifecycle', 'db', 'messaging', 'storage', 'outbound', 'catalog', 'testing', 'tracing'];

module.exports = {
  testEnvironment: 'node',
  roots: ['<rootDir>/libs', '<rootDir>/services', '<rootDir>/clients', '<rootDir>/tests', '<rootDir>/deploy'],
  testMatch: ['**/test/**/*.test.ts', '<rootDir>/tests/**/*.test.ts'],
  transform: {
    '^.+\\.ts$': ['ts-jest', { tsconfig: path.join(__dirname, 'tsconfig.test.json') }],
  },
  // Tests run against the TypeScript sources, so no build is needed between edit and test.
  moduleNameMapper: Object.fromEntries(libs.map((l) => [`^@tes/${l}$`, `<rootDir>/libs/${l}/src`])),
  testTimeout: 60_000,
  reporters: ['default', '<rootDir>/scripts/jest-summary-reporter.js'],
  maxWorkers: 2,
  // Secrets are grepped for in captured logs; keep jest's own output quiet.
  verbose: false,
};
