import { existsSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { parseAllDocuments } from 'yaml';

/**
 * Loads a kustomize tree the way `kubectl kustomize` builds it, for the few features this
 * repository uses: resources, components, ConfigMap/Secret generators (create and merge),
 * namespace, images, configurations. Any other kustomization field makes load() throw, so the
 * tests can never silently check something other than what kustomize would apply.
 * Not modelled on purpose: generated names' hash suffixes (kustomize rewrites every reference,
 * including KEDA's through base/kustomizeconfig.yaml) and the image rewrite (checked apart).
 * A secretGenerator reading `secrets.env` (never committed) reads `secrets.env.example`, also
 * when a real `secrets.env` lies beside it (both count as read).
 * real-kustomize.test.ts builds every overlay with the real kustomize (the pinned release) and
 * checks this renders the same objects, field for field, once both omissions are put back.
 */

export const REPO = path.resolve(__dirname, '../..');

export interface Obj {
  apiVersion: string;
  kind: string;
  metadata: Meta;
  [k: string]: any;
}
export interface Meta {
  name: string;
  namespace?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}
export interface ImageRule {
  name: string;
  newName?: string;
  newTag?: string;
  digest?: string;
}
export interface Tree {
  /** Every object, generated ConfigMaps/Secrets included (their data = the example values). */
  objects: Obj[];
  images: ImageRule[];
  namespace: string | undefined;
  /** Files the tree read (manifests, env files, transformer configs), absolute. */
  files: Set<string>;
}

const KUSTOMIZATION_KEYS = new Set([
  'apiVersion',
  'kind',
  'resources',
  'components',
  'configMapGenerator',
  'secretGenerator',
  'configurations',
  'namespace',
  'images',
]);
const GENERATOR_KEYS = new Set(['name', 'envs', 'files', 'literals', 'behavior', 'options']);
const OPTION_KEYS = new Set(['labels', 'annotations', 'disableNameSuffixHash']);

/** Parses a YAML stream; any error or warning fails. Empty documents are skipped. */
export function readYaml(file: string): unknown[] {
  const docs = parseAllDocuments(readFileSync(file, 'utf8'));
  const out: unknown[] = [];
  for (const doc of docs) {
    const problems = [...doc.errors, ...doc.warnings];
    if (problems.length > 0) throw new Error(`${file}: ${problems.map((p) => p.message).join('; ')}`);
    const value = doc.toJS() as unknown;
    if (value !== null && value !== undefined) out.push(value);
  }
  return out;
}

/** KEY=VALUE lines as kustomize's `envs` reads them (# comments and blank lines skipped). */
function readEnvFile(file: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const raw of readFileSync(file, 'utf8').split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const eq = line.indexOf('=');
    if (eq <= 0) throw new Error(`${file}: not KEY=VALUE: ${line}`);
    const key = line.slice(0, eq);
    if (key in out) throw new Error(`${file}: ${key} set twice`);
    out[key] = line.slice(eq + 1);
  }
  return out;
}

interface Generator {
  name: string;
  envs?: string[];
  files?: string[];
  literals?: string[];
  behavior?: 'create' | 'merge' | 'replace';
  options?: { labels?: Record<string, string>; annotations?: Record<string, string>; disableNameSuffixHash?: boolean };
}

export function load(dir: string, expectKind: 'Kustomization' | 'Component' = 'Kustomization'): Tree {
  const kfile = path.join(dir, 'kustomization.yaml');
  const [k] = readYaml(kfile) as Record<string, unknown>[];
  if (!k) throw new Error(`${kfile} is empty`);
  if (k.kind !== expectKind) throw new Error(`${kfile}: kind ${String(k.kind)}, expected ${expectKind}`);
  for (const key of Object.keys(k)) {
    if (!KUSTOMIZATION_KEYS.has(key)) throw new Error(`${kfile}: "${key}" is not modelled by deploy/test/kustomize.ts`);
  }
  const tree: Tree = { objects: [], images: [], namespace: undefined, files: new Set([kfile]) };

  const include = (sub: Tree): void => {
    tree.objects.push(...sub.objects);
    tree.images.push(...sub.images);
    for (const f of sub.files) tree.files.add(f);
  };
  for (const entry of (k.resources as string[] | undefined) ?? []) {
    const target = path.resolve(dir, entry);
    if (!existsSync(target)) throw new Error(`${kfile}: resource ${entry} does not exist`);
    if (statSync(target).isDirectory()) include(load(target, 'Kustomization'));
    else {
      tree.files.add(target);
      for (const o of readYaml(target)) tree.objects.push(checkObject(o, target));
    }
  }
  for (const entry of (k.components as string[] | undefined) ?? []) include(load(path.resolve(dir, entry), 'Component'));
  for (const entry of (k.configurations as string[] | undefined) ?? []) {
    const target = path.resolve(dir, entry);
    readYaml(target);
    tree.files.add(target);
  }
  generate(tree, dir, kfile, 'ConfigMap', (k.configMapGenerator as Generator[] | undefined) ?? []);
  generate(tree, dir, kfile, 'Secret', (k.secretGenerator as Generator[] | undefined) ?? []);
  tree.images.push(...((k.images as ImageRule[] | undefined) ?? []));
  if (typeof k.namespace === 'string') {
    tree.namespace = k.namespace;
    for (const o of tree.objects) o.metadata.namespace = k.namespace;
  }
  return tree;
}

function checkObject(o: unknown, file: string): Obj {
  const obj = o as Obj;
  if (typeof obj?.apiVersion !== 'string' || typeof obj.kind !== 'string' || typeof obj.metadata?.name !== 'string') {
    throw new Error(`${file}: a document without apiVersion, kind and metadata.name`);
  }
  return obj;
}

function generate(tree: Tree, dir: string, kfile: string, kind: 'ConfigMap' | 'Secret', generators: Generator[]): void {
  for (const g of generators) {
    for (const key of Object.keys(g)) if (!GENERATOR_KEYS.has(key)) throw new Error(`${kfile}: generator field "${key}" is not modelled`);
    for (const key of Object.keys(g.options ?? {})) if (!OPTION_KEYS.has(key)) throw new Error(`${kfile}: generator option "${key}" is not modelled`);
    const data: Record<string, string> = {};
    const put = (key: string, value: string): void => {
      if (key in data) throw new Error(`${kfile}: ${kind} ${g.name} sets ${key} twice`);
      data[key] = value;
    };
    for (const env of g.envs ?? []) {
      let file = path.resolve(dir, env);
      // a Secret's env file is never committed: its committed example is read in its place,
      // also where the operator's real file lies beside it (deploy/README.md has them make
      // one), so such a checkout tests the same and no real secret reaches a test's output
      if (kind === 'Secret' && existsSync(`${file}.example`)) {
        if (existsSync(file)) tree.files.add(file);
        file = `${file}.example`;
      }
      tree.files.add(file);
      for (const [key, value] of Object.entries(readEnvFile(file))) put(key, value);
    }
    for (const spec of g.files ?? []) {
      const [key, rel] = spec.includes('=') ? (spec.split('=', 2) as [string, string]) : [path.basename(spec), spec];
      const file = path.resolve(dir, rel);
      if (path.relative(dir, file).startsWith('..')) throw new Error(`${kfile}: ${spec} is outside the kustomization root`);
      tree.files.add(file);
      put(key, readFileSync(file, 'utf8'));
    }
    for (const literal of g.literals ?? []) {
      const eq = literal.indexOf('=');
      put(literal.slice(0, eq), literal.slice(eq + 1));
    }
    const existing = tree.objects.find((o) => o.kind === kind && o.metadata.name === g.name);
    const behavior = g.behavior ?? 'create';
    if (behavior === 'create') {
      if (existing) throw new Error(`${kfile}: ${kind} ${g.name} already exists (use behavior: merge)`);
      tree.objects.push({
        apiVersion: 'v1',
        kind,
        metadata: { name: g.name, labels: { ...g.options?.labels }, annotations: { ...g.options?.annotations } },
        data,
      });
    } else {
      if (!existing) throw new Error(`${kfile}: ${kind} ${g.name} to ${behavior} does not exist`);
      existing.data = behavior === 'merge' ? { ...existing.data, ...data } : data;
      // kustomize merges the options of a merge or replace into the existing object's, annotations as labels
      existing.metadata.labels = { ...existing.metadata.labels, ...g.options?.labels };
      existing.metadata.annotations = { ...existing.metadata.annotations, ...g.options?.annotations };
    }
  }
}

/** Whether a selector's matchLabels all hold in labels. An empty selector matches nothing here. */
export function selects(selector: Record<string, string> | undefined, labels: Record<string, string> | undefined): boolean {
  const entries = Object.entries(selector ?? {});
  return entries.length > 0 && entries.every(([k, v]) => labels?.[k] === v);
}

/** Kubernetes quantities (cpu "500m", "2"; memory "512Mi", "1Gi") as numbers. */
export function quantity(q: string | number): number {
  const m = /^([0-9.]+)(m|Ki|Mi|Gi|Ti|k|M|G)?$/.exec(String(q));
  if (!m) throw new Error(`not a quantity: ${q}`);
  const units: Record<string, number> = { m: 1e-3, Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, k: 1e3, M: 1e6, G: 1e9 };
  return Number(m[1]) * (m[2] ? (units[m[2]] ?? NaN) : 1);
}
