import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { loadConfig, type Config } from '@tes/config';
import { load, REPO, type Obj, type Tree } from './kustomize';

/**
 * What the deployment files must agree with, read from the code itself: the environment
 * variables libs/config reads, and helpers that resolve a container's environment from the
 * ConfigMaps and Secrets of a rendered overlay.
 */

/** Every variable libs/config/src/index.ts reads, taken from its source so none goes unwired. */
export function contractVariables(): Set<string> {
  const src = readFileSync(path.join(REPO, 'libs/config/src/index.ts'), 'utf8');
  const names = new Set<string>();
  // any reader called with the variable's name (str('PORT'), int(...), a new fraction(...) alike)
  for (const m of src.matchAll(/\b[a-zA-Z]+\(\s*'([A-Z][A-Z0-9_]*)'/g)) names.add(m[1]!);
  for (const m of src.matchAll(/\benv\.([A-Z][A-Z0-9_]*)/g)) names.add(m[1]!);
  // the regexes must keep finding the contract (a refactor of config must not empty this set)
  for (const known of ['DATABASE_URL', 'AMQP_URL', 'METRICS_PORT', 'SHUTDOWN_TIMEOUT_MS', 'WORKER_QUEUES', 'FAL_KEY']) {
    if (!names.has(known)) throw new Error(`contractVariables() no longer finds ${known} in libs/config/src/index.ts`);
  }
  return names;
}

/** Credentials: these come from a Secret only, never from a ConfigMap or a literal. */
export const SECRET_VARIABLES = new Set([
  'DATABASE_URL',
  'AMQP_URL',
  'S3_ACCESS_KEY_ID',
  'S3_SECRET_ACCESS_KEY',
  'REPLICATE_API_TOKEN',
  'OPENAI_API_KEY',
  'FAL_KEY',
]);
/** Provider credentials may be absent (their models are then unavailable). */
export const OPTIONAL_SECRETS = new Set(['REPLICATE_API_TOKEN', 'OPENAI_API_KEY', 'FAL_KEY']);
/** Secret keys read by something other than our processes (KEDA's TriggerAuthentication). */
export const NON_PROCESS_SECRET_KEYS = new Set(['RABBITMQ_MANAGEMENT_URL']);
/** Names that look like credentials; each must be listed in SECRET_VARIABLES. */
export const LOOKS_SECRET = /SECRET|TOKEN|PASSWORD|_KEY$|_KEY_ID$|^DATABASE_URL$|^AMQP_URL$/;

export const K8S = path.join(REPO, 'deploy/k8s');
export function overlayDirs(): string[] {
  const root = path.join(K8S, 'overlays');
  return readdirSync(root).map((d) => path.join(root, d));
}
export function loadOverlay(dir: string): Tree {
  return load(dir);
}

export function find(tree: Tree, kind: string, name?: string): Obj[] {
  return tree.objects.filter((o) => o.kind === kind && (name === undefined || o.metadata.name === name));
}

export type Container = any;
/** Pod templates of the workloads (Deployments and Jobs) with their owners. */
export function podTemplates(tree: Tree): { owner: Obj; pod: { metadata: { labels?: Record<string, string> }; spec: Container } }[] {
  return tree.objects.filter((o) => o.kind === 'Deployment' || o.kind === 'Job').map((owner) => ({ owner, pod: owner.spec.template }));
}

export interface EnvSource {
  from: 'configMap' | 'secret' | 'value';
  value: string;
  object?: string;
  optional?: boolean;
}

/**
 * A container's environment as the kubelet builds it: envFrom first, then env entries
 * (which win). Every dangling reference (object or key) is reported in problems.
 */
export function containerEnv(tree: Tree, c: Container, where: string, problems: string[]): Map<string, EnvSource> {
  const env = new Map<string, EnvSource>();
  const lookup = (kind: 'ConfigMap' | 'Secret', name: string): Record<string, string> | undefined => {
    const o = find(tree, kind, name)[0];
    if (!o) problems.push(`${where}: ${kind} ${name} does not exist`);
    return o?.data as Record<string, string> | undefined;
  };
  for (const ef of c.envFrom ?? []) {
    const kind = ef.configMapRef ? 'ConfigMap' : 'Secret';
    const name = (ef.configMapRef ?? ef.secretRef).name as string;
    const from = kind === 'ConfigMap' ? 'configMap' : 'secret';
    for (const [k, v] of Object.entries(lookup(kind, name) ?? {})) env.set(k, { from, value: v, object: name });
  }
  for (const e of c.env ?? []) {
    if (e.value !== undefined) {
      env.set(e.name, { from: 'value', value: String(e.value) });
      continue;
    }
    const ref = e.valueFrom?.secretKeyRef ?? e.valueFrom?.configMapKeyRef;
    if (!ref) {
      problems.push(`${where}: ${e.name} has neither value nor a ConfigMap/Secret key reference`);
      continue;
    }
    const kind = e.valueFrom.secretKeyRef ? 'Secret' : 'ConfigMap';
    const data = lookup(kind, ref.name);
    // even an optional key must be in the Secret template, so operators know it exists
    if (data && !(ref.key in data)) problems.push(`${where}: ${e.name} reads key ${ref.key} missing from ${kind} ${ref.name}`);
    env.set(e.name, { from: kind === 'Secret' ? 'secret' : 'configMap', value: data?.[ref.key] ?? '', object: ref.name, optional: ref.optional === true });
  }
  return env;
}

/** loadConfig over a container's resolved environment (Secret values are the example's). */
export function configOf(env: Map<string, EnvSource>): Config {
  return loadConfig(Object.fromEntries([...env].map(([k, v]) => [k, v.value])));
}

/** The container port a probe or Service names (by name or number), if the pod has it. */
export function resolvePort(containers: Container[], port: string | number): number | undefined {
  for (const c of containers) {
    for (const p of c.ports ?? []) {
      if (p.name === port || p.containerPort === port) return p.containerPort as number;
    }
  }
  return undefined;
}
