// `npm run lint:deps`: the import rules of shared/style.md ("The shape of the house").
// Layering rules apply to each package's src/; its tests may reach further (a contract test
// reads the gateway's error table). Workspace packages resolve as node resolves them, to their built dist/ (the `lint` script
// builds first); rules therefore match a package by its folder, whatever file inside it.
const fs = require('node:fs');
const path = require('node:path');

const TESTS = '(^|/)test/|^tests/';
const DEV_TOOLS = '^scripts/';

/** Every workspace folder (libs/*, services/*, clients/typescript, clients/console, scripts/dev) by package name. */
function workspaces() {
  const root = JSON.parse(fs.readFileSync(path.join(__dirname, 'package.json'), 'utf8'));
  const dirs = root.workspaces.flatMap((w) =>
    w.endsWith('/*') ? fs.readdirSync(path.join(__dirname, w.slice(0, -2))).map((d) => `${w.slice(0, -2)}/${d}`) : [w],
  );
  return dirs
    .filter((dir) => fs.existsSync(path.join(__dirname, dir, 'package.json')))
    .map((dir) => ({ dir, pkg: JSON.parse(fs.readFileSync(path.join(__dirname, dir, 'package.json'), 'utf8')) }));
}

function rootDevDependencies() {
  const root = JSON.parse(fs.readFileSync(path.join(__dirname, 'package.json'), 'utf8'));
  return Object.keys(root.devDependencies).map((name) => name.replace(/[.]/g, '\\.'));
}

/** A package's source may import only the workspace packages its package.json declares. */
function declaredWorkspaceRules() {
  const all = workspaces();
  const dirOf = new Map(all.map(({ dir, pkg }) => [pkg.name, dir]));
  return all.map(({ dir, pkg }) => {
    const declared = Object.keys({ ...pkg.dependencies, ...pkg.peerDependencies })
      .map((name) => dirOf.get(name))
      .filter(Boolean);
    return {
      name: 'undeclared-workspace-dependency',
      comment: `${pkg.name} imports a workspace package its package.json does not declare`,
      severity: 'error',
      from: { path: `^${dir}/src/` },
      // By path: a workspace package resolves through its node_modules symlink to its folder, which
      // dependency-cruiser types as 'undetermined', not as a workspace dependency.
      to: { path: '^(libs|services|clients|scripts)/', pathNot: [dir, ...declared].map((d) => `^${d}/`) },
    };
  });
}

module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      comment: 'No import cycles, type-only imports included: a cycle closed by `import type` is still a cycle of ideas.',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
    {
      name: 'core-imports-no-package',
      comment: 'libs/core is the pure domain: it imports no other workspace package.',
      severity: 'error',
      from: { path: '^libs/core/src/' },
      to: { path: '^(libs|services|clients|scripts)/', pathNot: '^libs/core/' },
    },
    {
      name: 'foundation-imports-core-only',
      comment: 'config, observability and outbound build on core alone.',
      severity: 'error',
      from: { path: '^libs/(config|observability|outbound)/src/' },
      to: { path: '^(libs|services|clients|scripts)/', pathNot: ['^libs/core/', '^libs/$1/'] },
    },
    {
      name: 'lifecycle-beside-observability',
      comment: 'libs/lifecycle uses core and the logger of observability, nothing above them.',
      severity: 'error',
      from: { path: '^libs/lifecycle/src/' },
      to: { path: '^(libs|services|clients|scripts)/', pathNot: '^libs/(core|observability|lifecycle)/' },
    },
    {
      name: 'adapters-never-import-each-other',
      comment: 'db, messaging, storage and catalog never import one another: orchestration across them lives in a service.',
      severity: 'error',
      from: { path: '^libs/(db|messaging|storage|catalog)/src/' },
      to: { path: '^libs/(db|messaging|storage|catalog)/', pathNot: '^libs/$1/' },
    },
    {
      name: 'libs-never-import-services',
      comment: 'Imports point from services to libs, never back.',
      severity: 'error',
      from: { path: '^libs/[^/]+/src/' },
      to: { path: '^(services|scripts)/' },
    },
    {
      name: 'services-never-import-each-other',
      comment: 'A service shares code with another only through a lib.',
      severity: 'error',
      from: { path: '^services/([^/]+)/src/' },
      to: { path: '^services/', pathNot: '^services/$1/' },
    },
    {
      name: 'testing-only-from-tests',
      comment: 'libs/testing (harnesses, embedded S3) is for tests and the development scripts (npm start, the bench), never shipped code.',
      severity: 'error',
      from: { pathNot: [TESTS, DEV_TOOLS, '^libs/testing/'] },
      to: { path: '^libs/testing/' },
    },
    {
      name: 'client-stands-alone',
      comment: 'clients/typescript is the published SDK: it imports no workspace package, and no service or lib imports it.',
      severity: 'error',
      from: { path: '^clients/typescript/src/' },
      to: { path: '^(libs|services|clients|scripts)/', pathNot: '^clients/typescript/' },
    },
    {
      name: 'clients-call-the-api-only',
      comment:
        'clients/ holds callers of the public HTTP API (the SDK, the browser console): their code imports no lib, service or script. The console takes the SDK from clients/typescript.',
      severity: 'error',
      from: { path: '^clients/[^/]+/src/' },
      to: { path: '^(libs|services|scripts)/' },
    },
    {
      name: 'nothing-ships-the-client',
      comment:
        'The SDK is a client of the HTTP API; shipped code does not call its own API through it. The browser console is itself a client of the API: it takes the types of openapi.json from the SDK (type-only imports).',
      severity: 'error',
      from: { path: '^(libs|services)/[^/]+/src/' },
      to: { path: '^clients/typescript/' },
    },
    ...declaredWorkspaceRules(),
    {
      name: 'no-non-package-json',
      comment: 'Every npm package a file imports is declared in the package.json nearest to it.',
      severity: 'error',
      from: { pathNot: TESTS },
      to: { dependencyTypes: ['npm-no-pkg', 'npm-unknown'] },
    },
    {
      name: 'no-non-package-json',
      comment: "A package's tests run from the root: they may use its devDependencies, and nothing undeclared.",
      severity: 'error',
      from: { path: TESTS },
      to: { dependencyTypes: ['npm-no-pkg', 'npm-unknown'], pathNot: `^node_modules/(${rootDevDependencies().join('|')})/` },
    },
    {
      name: 'not-to-dev-dep',
      comment: 'Shipped source does not import a devDependency: production installs omit them.',
      severity: 'error',
      from: { path: '^(libs|services|clients)/[^/]+/src/|^scripts/dev/src/', pathNot: '^libs/testing/' },
      to: { dependencyTypes: ['npm-dev'], dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'not-to-unresolvable',
      comment: 'An import that resolves to nothing (run `npx tsc -b` first: workspace packages resolve to dist/).',
      severity: 'error',
      from: {},
      to: { couldNotResolve: true },
    },
    {
      name: 'no-deprecated-core',
      comment: 'A deprecated node core module.',
      severity: 'error',
      from: {},
      to: { dependencyTypes: ['core'], path: '^(punycode|domain|constants|sys|_linklist|_stream_wrap)$' },
    },
  ],
  options: {
    doNotFollow: { path: ['node_modules', '/dist/'] },
    exclude: { path: ['clients/typescript/src/schema\\.ts$'] },
    tsPreCompilationDeps: true,
    // Each file is checked against the package.json nearest to it, not the root's as well.
    combinedDependencies: false,
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['require', 'node', 'default', 'types'],
      extensions: ['.ts', '.tsx', '.js', '.d.ts', '.json'],
      mainFields: ['main', 'types'],
    },
  },
};
