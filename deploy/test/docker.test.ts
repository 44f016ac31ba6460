import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { LOOKS_SECRET } from './contract';
import { chain, copies, effective, parseDockerfile, type Dockerfile } from './dockerfile';
import { REPO } from './kustomize';

/**
 * docker/Dockerfile, read as stages (no Docker engine here): what each service image inherits,
 * runs as, runs, and contains, checked against the repository (workspaces, package
 * dependencies, tsconfig outputs). docker/compose.yaml is checked in compose.test.ts.
 */

const SERVICES = ['gateway', 'worker', 'relay', 'admin'] as const;
let df: Dockerfile;
beforeAll(() => {
  df = parseDockerfile();
});

interface Pkg {
  name: string;
  dependencies?: Record<string, string>;
  workspaces?: string[];
}
const readPkg = (dir: string): Pkg => JSON.parse(readFileSync(path.join(REPO, dir, 'package.json'), 'utf8')) as Pkg;

/** Workspace folders of the root package.json, globs expanded. */
function workspaces(): string[] {
  return (readPkg('.').workspaces ?? [])
    .flatMap((w) => (w.endsWith('/*') ? readdirSync(path.join(REPO, w.slice(0, -2))).map((d) => `${w.slice(0, -2)}/${d}`) : [w]))
    .filter((d) => existsSync(path.join(REPO, d, 'package.json')));
}

/** The @tes/* workspaces a service needs at run time, itself included. */
function runtimeWorkspaces(service: string): string[] {
  const byName = new Map(workspaces().map((d) => [readPkg(d).name, d]));
  const seen = new Set<string>();
  const visit = (dir: string): void => {
    if (seen.has(dir)) return;
    seen.add(dir);
    for (const dep of Object.keys(readPkg(dir).dependencies ?? {})) {
      const d = byName.get(dep);
      if (d) visit(d);
    }
  };
  visit(`services/${service}`);
  return [...seen];
}

/** Destinations a target's image holds (relative to /app), following COPY --from=<stage> /app. */
function contents(target: string): Set<string> {
  const out = new Set<string>();
  for (const stage of chain(df, target)) {
    for (const c of copies(stage.body)) {
      const from = df.stages.find((s) => s.name === c.from);
      if (from && c.sources.includes('/app')) for (const x of contents(from.name)) out.add(x);
      else out.add(c.dest.replace(/\/$/, ''));
      for (const src of c.sources) if (c.dest.endsWith('/')) out.add(`${c.dest}${path.basename(src)}`);
    }
  }
  return out;
}

test('production stages start from node:24-bookworm-slim or from another stage', () => {
  expect(df.globalArgs.NODE_IMAGE).toBe('node:24-bookworm-slim');
  const names = new Set(df.stages.map((s) => s.name));
  for (const s of df.stages) expect(s.from === '${NODE_IMAGE}' || names.has(s.from)).toBe(true);
});

test.each(SERVICES)('%s: multi-stage, non-root, runs its compiled main.js', (service) => {
  const e = effective(df, service);
  // runtime images never descend from the build stage (sources, dev dependencies, npm cache)
  expect(chain(df, service).map((s) => s.name)).not.toContain('build');
  expect(e.body.some((i) => i.op === 'RUN' && /\btsc\b|npm (ci|install)/.test(i.args))).toBe(false);
  expect(e.user).toBeDefined();
  expect(['root', '0', '0:0', 'root:root', '']).not.toContain(e.user);
  expect(e.user).toMatch(/^(node|1000)(:(node|1000))?$/);
  const main = `services/${service}/dist/main.js`;
  expect(e.command).toContain(main);
  expect(e.command[e.command.indexOf(main) - 1]).toBe('node');
  // dist/main.js is what `tsc -b` makes of src/main.ts: rootDir src, outDir dist
  const tsconfig = JSON.parse(readFileSync(path.join(REPO, `services/${service}/tsconfig.json`), 'utf8')) as {
    compilerOptions: { rootDir: string; outDir: string };
  };
  expect(tsconfig.compilerOptions).toMatchObject({ rootDir: 'src', outDir: 'dist' });
  expect(existsSync(path.join(REPO, `services/${service}/src/main.ts`))).toBe(true);
  expect(readFileSync(path.join(REPO, 'tsconfig.json'), 'utf8')).toContain(`services/${service}`);
});

test('the admin image migrates by default; the gateway image carries openapi.json', () => {
  expect(effective(df, 'admin').command).toEqual(['node', 'services/admin/dist/main.js', 'migrate']);
  expect(contents('gateway')).toContain('services/gateway/openapi.json');
  // the gateway serves it from beside its dist/ (services/gateway/src/app.ts)
  expect(readFileSync(path.join(REPO, 'services/gateway/src/app.ts'), 'utf8')).toContain("'../openapi.json'");
});

test.each(SERVICES)('%s: the image holds the dist and package.json of every workspace it imports', (service) => {
  const have = contents(service);
  for (const ws of runtimeWorkspaces(service)) {
    expect(have).toContain(`${ws}/dist`);
    expect(have).toContain(`${ws}/package.json`);
  }
  expect(have).toContain('node_modules');
  expect([...have].filter((p) => p.startsWith('libs/testing') || p.startsWith('scripts/'))).toEqual([]);
});

test('the worker image installs ffmpeg, espeak-ng and the font, without recommends, lists removed', () => {
  const runs = effective(df, 'worker')
    .body.filter((i) => i.op === 'RUN')
    .map((i) => i.args);
  const apt = runs.find((r) => r.includes('apt-get install'));
  expect(apt).toBeDefined();
  for (const pkg of ['ffmpeg', 'espeak-ng', 'fonts-dejavu-core', '--no-install-recommends', 'rm -rf /var/lib/apt/lists']) expect(apt).toContain(pkg);
  for (const service of ['relay', 'admin']) {
    expect(effective(df, service).body.some((i) => i.args.includes('ffmpeg'))).toBe(false);
  }
  // the gateway measures uploads with ffprobe (quotes that fit the file): ffmpeg, without recommends
  const gatewayApt = effective(df, 'gateway').body.find((i) => i.op === 'RUN' && i.args.includes('apt-get install'))?.args;
  for (const part of ['ffmpeg', '--no-install-recommends', 'rm -rf /var/lib/apt/lists']) expect(gatewayApt).toContain(part);
  expect(gatewayApt).not.toContain('espeak-ng');
});

test('both installs see the manifest of every workspace (npm ci checks them all against the lockfile)', () => {
  const manifests = df.stages.find((s) => s.name === 'manifests')!;
  const copied = copies(manifests.body).flatMap((c) => c.sources);
  expect(copied).toEqual(expect.arrayContaining(['package.json', 'package-lock.json']));
  // every workspace folder is inside a copied folder, and the cleanup keeps package.json files
  for (const ws of workspaces()) expect([ws, copied.some((c) => ws === c || ws.startsWith(`${c}/`))]).toEqual([ws, true]);
  expect(manifests.body.find((i) => i.op === 'RUN')?.args).toMatch(/-type f ! -name package\.json -delete/);
  for (const stage of ['build', 'prod-deps']) {
    const body = df.stages.find((s) => s.name === stage)!.body;
    const from = body.findIndex((i) => i.op === 'COPY' && i.args.startsWith('--from=manifests'));
    const install = body.findIndex((i) => i.op === 'RUN' && i.args.includes('npm ci'));
    expect([stage, from >= 0 && from < install]).toEqual([stage, true]);
  }
  const install = df.stages.find((s) => s.name === 'prod-deps')!.body.find((i) => i.op === 'RUN')!.args;
  expect(install).toMatch(/npm ci .*--omit=dev/);
  const wanted = SERVICES.map((s) => readPkg(`services/${s}`).name).sort();
  expect([...install.matchAll(/--workspace=(\S+)/g)].map((m) => m[1]).sort()).toEqual(wanted);
});

test('no credential in a layer; .dockerignore keeps local builds, installs and secrets out', () => {
  for (const stage of df.stages) {
    for (const i of stage.body.filter((x) => x.op === 'ARG' || x.op === 'ENV')) {
      expect(i.args.split(/[\s=]/)[0]).not.toMatch(LOOKS_SECRET);
    }
  }
  const ignore = readFileSync(path.join(REPO, '.dockerignore'), 'utf8')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'));
  for (const p of ['**/node_modules', '**/dist', '.env', '**/secrets.env', '.git']) expect(ignore).toContain(p);
  // nothing the build copies from the context may be ignored
  const toRegex = (p: string) =>
    new RegExp(
      `^${p
        .replace(/[.+^${}()|[\]\\]/g, '\\$&')
        .replace(/\*\*\//g, '(.*/)?')
        .replace(/\*/g, '[^/]*')}(/.*)?$`,
    );
  const patterns = ignore.map(toRegex);
  const fromContext = df.stages.flatMap((s) =>
    copies(s.body)
      .filter((c) => c.from === undefined)
      .flatMap((c) => c.sources),
  );
  expect(fromContext.length).toBeGreaterThan(5);
  for (const src of fromContext) {
    expect(patterns.filter((re) => re.test(src)).map(String)).toEqual([]);
    expect(existsSync(path.join(REPO, src))).toBe(true);
  }
});

test('every service image carries the OCI labels: its title and description, the release, the commit, the source', () => {
  const labelsOf = (target: string): Record<string, string> => {
    const out: Record<string, string> = {};
    for (const i of effective(df, target).body.filter((x) => x.op === 'LABEL')) {
      for (const m of i.args.matchAll(/([a-z0-9.-]+)="([^"]*)"/g)) out[m[1]!] = m[2]!;
    }
    return out;
  };
  const titles = new Set<string>();
  for (const target of SERVICES) {
    const labels = labelsOf(target);
    for (const key of ['title', 'description', 'version', 'revision', 'created', 'source', 'base.name']) {
      expect([target, key, labels[`org.opencontainers.image.${key}`]]).toEqual([target, key, expect.stringMatching(/\S/)]);
    }
    expect(labels['org.opencontainers.image.version']).toBe('${VERSION}');
    expect(labels['org.opencontainers.image.revision']).toBe('${REVISION}');
    titles.add(labels['org.opencontainers.image.title']!);
  }
  expect(titles.size).toBe(SERVICES.length);
  // the build arguments the labels read are declared in the stage that reads them
  for (const target of SERVICES) {
    const args = effective(df, target)
      .body.filter((x) => x.op === 'ARG')
      .map((x) => x.args.split('=')[0]);
    expect([target, ['NODE_IMAGE', 'VERSION', 'REVISION', 'CREATED'].filter((a) => !args.includes(a))]).toEqual([target, []]);
  }
  // REVISION and CREATED change on every release build: no RUN (apt-get) may follow their ARG or
  // the labels in a target's chain, or each release build reinstalls the programs
  for (const target of SERVICES) {
    const body = effective(df, target).body;
    const first = body.findIndex(
      (x) => (x.op === 'ARG' && /^(REVISION|CREATED)\b/.test(x.args)) || (x.op === 'LABEL' && /\$\{(REVISION|CREATED)\}/.test(x.args)),
    );
    expect([
      target,
      first >= 0 &&
        body
          .slice(first)
          .filter((x) => x.op === 'RUN')
          .map((x) => x.args),
    ]).toEqual([target, []]);
  }
});
