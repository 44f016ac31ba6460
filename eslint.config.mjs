// @ts-check
// `npm run lint:eslint`. Type-aware: it reads the built declarations of the workspace packages,
// so it runs after `tsc -b` (the `lint` script's typecheck does that first).
import js from '@eslint/js';
import globals from 'globals';
import tseslint from 'typescript-eslint';

const TESTS = ['**/test/**', 'tests/**'];

export default tseslint.config(
  {
    ignores: ['**/dist/**', '**/node_modules/**', 'clients/typescript/src/schema.ts', 'coverage/**', 'test-output/**'],
  },
  js.configs.recommended,
  tseslint.configs.strictTypeChecked,
  tseslint.configs.stylisticTypeChecked,
  {
    languageOptions: {
      parserOptions: {
        project: ['./tsconfig.test.json', './scripts/bench/tsconfig.json', './clients/console/tsconfig.json'],
        tsconfigRootDir: import.meta.dirname,
      },
    },
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    rules: {
      // noUncheckedIndexedAccess makes `xs[i]!` after a bounds or length check the house idiom.
      '@typescript-eslint/no-non-null-assertion': 'off',
      // Counts, sizes and durations are interpolated into messages everywhere; objects are not.
      '@typescript-eslint/restrict-template-expressions': ['error', { allowNumber: true }],
      // `(done) => server.close(done)` hands a callback on; `return send(res, …)` ends a handler.
      '@typescript-eslint/no-confusing-void-expression': ['error', { ignoreArrowShorthand: true, ignoreVoidReturningFunctions: true }],
      // Misfires on instances of subclasses of a package's class (CaptureTransport extends winston-transport).
      '@typescript-eslint/no-unsafe-class-instance-assignment': 'off',
      // `env.X || fallback` treats an empty string as unset, and a probe's duration of 0 as unknown, on purpose.
      '@typescript-eslint/prefer-nullish-coalescing': ['error', { ignorePrimitives: { string: true, number: true } }],
      // A promise may pass on what it caught (`unknown`) or its AbortSignal's reason (`any`).
      '@typescript-eslint/prefer-promise-reject-errors': ['error', { allowThrowingAny: true, allowThrowingUnknown: true }],
      // Logs go through the winston logger (style.md 13); CLIs write JSON to process.stdout.
      'no-console': 'error',
      // Packages that ship no types are required and cast to the slice of them we use.
      '@typescript-eslint/no-require-imports': ['error', { allow: ['^autocannon$'] }],
      // Prettier owns the layout: it may put a computed member of a long chain on a line of its own
      // (`[method](path)` under `.http()`), which parses the same; eslint-config-prettier turns this off too.
      'no-unexpected-multiline': 'off',
      // `async` on a synchronous body that implements a Promise-returning contract (stop(), a knex
      // migration source, a test double) keeps its throw a rejection, which the callers expect.
      '@typescript-eslint/require-await': 'off',
      // TypeScript keeps a narrowing across an await or a callback that changes the value (TS #9998):
      // long-lived parts (style.md 3) re-read their stop flags after each await, which this calls useless.
      '@typescript-eslint/no-unnecessary-condition': 'off',
      // `_next` keeps Express's four-argument error handler; a rest pattern leaves out what it names.
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', ignoreRestSiblings: true }],
    },
  },
  {
    files: TESTS,
    rules: {
      // Tests inspect untyped JSON and YAML (response bodies, manifests) and assert on its shape.
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
      '@typescript-eslint/restrict-plus-operands': 'off',
      // A test prints what it measured (a fuzz run's statuses, a recovery time) for the log.
      'no-console': 'off',
    },
  },
  {
    files: ['deploy/test/**'],
    rules: {
      // Manifests are parsed YAML walked as untyped trees; the tests are the schema.
      '@typescript-eslint/no-explicit-any': 'off',
    },
  },
  {
    files: ['**/*.js', '**/*.cjs', '**/*.mjs'],
    extends: [tseslint.configs.disableTypeChecked],
    languageOptions: { globals: globals.node, sourceType: 'commonjs' },
    rules: {
      // Jest configs and reporters are CommonJS modules loaded by jest itself.
      '@typescript-eslint/no-require-imports': 'off',
    },
  },
  {
    files: ['**/*.mjs'],
    languageOptions: { sourceType: 'module' },
  },
);
