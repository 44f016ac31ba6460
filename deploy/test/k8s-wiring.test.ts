import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  configOf,
  containerEnv,
  contractVariables,
  find,
  K8S,
  loadOverlay,
  LOOKS_SECRET,
  NON_PROCESS_SECRET_KEYS,
  OPTIONAL_SECRETS,
  overlayDirs,
  podTemplates,
  SECRET_VARIABLES,
} from './contract';
import { readYaml, REPO, type Tree } from './kustomize';
import { dockerTargets } from './dockerfile';

/**
 * How configuration reaches the processes: every variable of the contract (libs/config) is
 * wired from the ConfigMap or the Secret, every reference resolves, the resulting environment
 * passes loadConfig, images exist as Dockerfile targets, and the migration runs first.
 */

function walk(dir: string): string[] {
  return readdirSync(dir).flatMap((f) => {
    const p = path.join(dir, f);
    return statSync(p).isDirectory() ? walk(p) : [p];
  });
}

/** The manifests, env files and dashboards under root's deploy/k8s and deploy/grafana that no overlay reads. */
function unusedFiles(root: string): string[] {
  const k8s = path.join(root, 'deploy/k8s');
  const used = new Set<string>();
  for (const dir of readdirSync(path.join(k8s, 'overlays'))) for (const f of loadOverlay(path.join(k8s, 'overlays', dir)).files) used.add(f);
  // the database, applied on its own (deploy/README.md, "PostgreSQL: failover, backups, restore")
  for (const f of loadOverlay(path.join(k8s, 'postgres')).files) used.add(f);
  const files = [...walk(k8s), ...walk(path.join(root, 'deploy/grafana'))].filter((f) => /\.(ya?ml|env|env\.example|json)$/.test(f));
  expect(files.length).toBeGreaterThan(10);
  for (const f of files.filter((x) => /\.ya?ml$/.test(x))) expect(() => readYaml(f)).not.toThrow();
  return files.filter((f) => !used.has(f)).map((f) => path.relative(root, f));
}

test('every manifest under deploy/k8s and deploy/grafana parses and is part of an overlay or of the database kustomization', () => {
  expect(path.join(REPO, 'deploy/k8s')).toBe(K8S);
  expect(unusedFiles(REPO)).toEqual([]);
});

test('a checkout that followed the deploy steps (secrets.env made from its example) passes the same checks, and its secrets are never read', () => {
  // a copy of deploy/ with the file section 2 of deploy/README.md has the operator create:
  // the example stays part of the overlay, the real file is not "unused", and the tests go on
  // reading the example's placeholders, never a real credential (no secret in a test's output)
  const root = mkdtempSync(path.join(os.tmpdir(), 'tes-deploy-'));
  try {
    for (const d of ['deploy/k8s', 'deploy/grafana']) cpSync(path.join(REPO, d), path.join(root, d), { recursive: true });
    for (const dir of readdirSync(path.join(root, 'deploy/k8s/overlays'))) {
      const example = path.join(root, 'deploy/k8s/overlays', dir, 'secrets.env.example');
      writeFileSync(example.replace(/\.example$/, ''), readFileSync(example, 'utf8').replace(/^([A-Z_]+)=.*$/gm, '$1=real-secret-value'));
    }
    expect(unusedFiles(root)).toEqual([]);
    for (const dir of readdirSync(path.join(root, 'deploy/k8s/overlays'))) {
      const secret = find(loadOverlay(path.join(root, 'deploy/k8s/overlays', dir)), 'Secret', 'tes-secrets')[0]!;
      expect(Object.values(secret.data as Record<string, string>)).not.toContain('real-secret-value');
      expect(Object.keys(secret.data as Record<string, string>).length).toBeGreaterThan(3);
    }
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test('secrets.env is never committed, only its example', () => {
  for (const dir of overlayDirs()) {
    expect(readFileSync(path.join(dir, '.gitignore'), 'utf8').split('\n')).toContain('secrets.env');
  }
});

test('every credential-looking contract variable is a declared secret', () => {
  const contract = contractVariables();
  expect([...contract].filter((v) => LOOKS_SECRET.test(v) && !SECRET_VARIABLES.has(v))).toEqual([]);
  expect([...SECRET_VARIABLES].filter((v) => !contract.has(v))).toEqual([]);
});

describe.each(overlayDirs().map((d) => [path.basename(d), d]))('overlay %s', (_name, dir) => {
  let tree: Tree;
  beforeAll(() => {
    tree = loadOverlay(dir);
  });

  test('every process gets every contract variable, credentials from the Secret only, and a valid config', () => {
    const contract = contractVariables();
    const problems: string[] = [];
    for (const d of find(tree, 'Deployment')) {
      for (const c of d.spec.template.spec.containers) {
        const where = `${d.metadata.name}/${c.name}`;
        const env = containerEnv(tree, c, where, problems);
        for (const v of contract) {
          const src = env.get(v);
          if (!src) problems.push(`${where}: ${v} is not wired`);
          else if (SECRET_VARIABLES.has(v) && src.from !== 'secret') problems.push(`${where}: ${v} must come from a Secret, not a ${src.from}`);
          else if (src.from === 'secret' && src.optional && !OPTIONAL_SECRETS.has(v)) problems.push(`${where}: required ${v} is optional`);
        }
        // the processes must boot on this environment (bad number, URL, level, prefix ... )
        try {
          configOf(env);
        } catch (err) {
          problems.push(`${where}: ${(err as Error).message}`);
        }
      }
    }
    expect(problems).toEqual([]);
  });

  test('ConfigMap and Secret hold contract variables only, each in one place, every Secret key used', () => {
    const contract = contractVariables();
    const problems: string[] = [];
    const used = new Set<string>();
    for (const { owner, pod } of podTemplates(tree)) {
      for (const c of pod.spec.containers) for (const [k, v] of containerEnv(tree, c, owner.metadata.name, problems)) if (v.from === 'secret') used.add(k);
    }
    for (const a of find(tree, 'TriggerAuthentication')) for (const r of a.spec.secretTargetRef) used.add(r.key);
    const configKeys = new Set(find(tree, 'ConfigMap', 'tes-config').flatMap((o) => Object.keys(o.data)));
    expect(configKeys.size).toBeGreaterThan(0);
    for (const k of configKeys) {
      if (!contract.has(k)) problems.push(`tes-config sets ${k}, which libs/config does not read`);
      if (SECRET_VARIABLES.has(k)) problems.push(`tes-config holds the credential ${k}`);
    }
    for (const s of find(tree, 'Secret')) {
      for (const k of Object.keys(s.data)) {
        if (!contract.has(k) && !NON_PROCESS_SECRET_KEYS.has(k)) problems.push(`Secret ${s.metadata.name} has ${k}, read by nothing`);
        if (configKeys.has(k)) problems.push(`${k} is both in tes-config and Secret ${s.metadata.name}`);
        if (!used.has(k)) problems.push(`Secret ${s.metadata.name} key ${k} is referenced by no manifest`);
      }
    }
    expect(problems).toEqual([]);
  });

  test('every image is retargeted by the overlay and built by a Dockerfile target', () => {
    const targets = dockerTargets();
    const images = new Set(podTemplates(tree).flatMap(({ pod }) => pod.spec.containers.map((c: { image: string }) => c.image)));
    expect([...images].sort()).toEqual(['tes-admin', 'tes-gateway', 'tes-relay', 'tes-worker']);
    for (const image of images) {
      expect(targets).toContain(image.replace(/^tes-/, ''));
      const rule = tree.images.find((r) => r.name === image);
      expect(rule?.newName).toBeTruthy();
      expect(rule?.newTag ?? rule?.digest).toBeTruthy();
    }
  });

  test('the migration Job runs admin migrate, and the pre-deploy phase holds everything it needs', () => {
    const [job] = find(tree, 'Job', 'tes-migrate');
    expect(job).toBeDefined();
    const pod = job!.spec.template.spec;
    const c = pod.containers[0];
    expect(c.image).toBe('tes-admin');
    expect([...c.command, ...(c.args ?? [])]).toEqual(['node', 'services/admin/dist/main.js', 'migrate']);
    expect(pod.restartPolicy).toBe('Never');
    const problems: string[] = [];
    const env = containerEnv(tree, c, 'tes-migrate', problems);
    expect(problems).toEqual([]);
    expect(env.get('DATABASE_URL')?.from).toBe('secret');
    expect(() => configOf(env)).not.toThrow();
    // Applying `-l tes/phase=pre-deploy` first must create the Job and all it references.
    const phase = (kind: string, name: string) => find(tree, kind, name)[0]?.metadata.labels?.['tes/phase'];
    expect(job!.metadata.labels?.['tes/phase']).toBe('pre-deploy');
    expect(phase('ServiceAccount', pod.serviceAccountName)).toBe('pre-deploy');
    for (const ef of c.envFrom) expect(phase('ConfigMap', ef.configMapRef.name)).toBe('pre-deploy');
    for (const e of c.env) expect(phase('Secret', e.valueFrom.secretKeyRef.name)).toBe('pre-deploy');
    // nothing else is in that phase: the services must not start before the migration ends
    const early = tree.objects.filter((o) => o.metadata.labels?.['tes/phase'] === 'pre-deploy').map((o) => o.kind);
    expect(early.filter((k) => !['Job', 'ServiceAccount', 'ConfigMap', 'Secret'].includes(k))).toEqual([]);
  });

  test('under Argo CD the migration runs after what it reads exists and before the services (issue #27)', () => {
    const [job] = find(tree, 'Job', 'tes-migrate');
    const wave = (o: { metadata: { annotations?: Record<string, string> } }) => Number(o.metadata.annotations?.['argocd.argoproj.io/sync-wave'] ?? 0);
    // A PreSync hook runs before the Sync phase creates the generated tes-config-<hash> and
    // tes-secrets-<hash> it reads: it waited for them until its deadline.
    expect(job!.metadata.annotations?.['argocd.argoproj.io/hook']).toBe('Sync');
    expect(wave(job!)).toBe(-1);
    const pod = job!.spec.template.spec;
    const c = pod.containers[0];
    const read = [
      find(tree, 'ServiceAccount', pod.serviceAccountName)[0]!,
      ...c.envFrom.map((ef: { configMapRef: { name: string } }) => find(tree, 'ConfigMap', ef.configMapRef.name)[0]!),
      ...c.env.map((e: { valueFrom: { secretKeyRef: { name: string } } }) => find(tree, 'Secret', e.valueFrom.secretKeyRef.name)[0]!),
    ];
    for (const o of read) expect(wave(o)).toBeLessThan(-1);
    // and everything else comes after it
    const others = tree.objects.filter((o) => o !== job && !read.includes(o));
    expect(others.filter((o) => wave(o) <= -1).map((o) => `${o.kind}/${o.metadata.name}`)).toEqual([]);
  });
});

test('deploy/README.md applies the pre-deploy phase, waits for the migration, then applies the rest', () => {
  const readme = readFileSync(path.join(REPO, 'deploy/README.md'), 'utf8');
  const section = readme.slice(readme.indexOf('## Deploy to Kubernetes'));
  const steps = ['-l tes/phase=pre-deploy', 'wait --for=condition=complete job/tes-migrate', 'kubectl apply -k deploy/k8s/overlays/production\n'];
  const at = steps.map((s) => section.indexOf(s));
  expect(at.every((i) => i >= 0)).toBe(true);
  expect([...at].sort((a, b) => a - b)).toEqual(at);
});
