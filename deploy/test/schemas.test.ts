import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parse } from 'yaml';
import { K8S, loadOverlay, overlayDirs } from './contract';
import { load, type Obj } from './kustomize';

/**
 * Every object each overlay renders, checked as an API server would before storing it: the
 * Kubernetes, KEDA, prometheus-operator and CloudNativePG OpenAPI schemas (compiled by the kubernetes-models
 * packages; validate-objects.mjs runs them in a child process, the packages being ES modules
 * only) with strict field validation, plus the object-meta rules the schemas do not carry
 * (names, label syntax, the namespace).
 */

const VALIDATOR = path.join(__dirname, 'validate-objects.mjs');

function schemaProblems(objects: unknown[]): string[] {
  const r = spawnSync(process.execPath, [VALIDATOR], { input: JSON.stringify(objects), encoding: 'utf8', cwd: __dirname });
  if (r.status !== 0) throw new Error(`validate-objects.mjs failed: ${r.stderr}`);
  return JSON.parse(r.stdout) as string[];
}

/** As kustomize's secretGenerator writes them: kustomize.ts keeps the plain example values for the contract tests. */
function asApplied(o: Obj): Obj {
  if (o.kind !== 'Secret' || !o.data) return o;
  return { ...o, data: Object.fromEntries(Object.entries(o.data as Record<string, string>).map(([k, v]) => [k, Buffer.from(v).toString('base64')])) };
}

const DNS_SUBDOMAIN = /^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const LABEL_NAME = /^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)$/;
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;

/** What the API server checks in metadata beyond the schema (apimachinery's ValidateObjectMeta). */
function metaProblems(o: Obj): string[] {
  const where = `${o.kind} ${o.metadata.name}`;
  const problems: string[] = [];
  if (!DNS_SUBDOMAIN.test(o.metadata.name)) problems.push(`${where}: name is not a DNS subdomain`);
  if (!o.metadata.namespace) problems.push(`${where}: no namespace (the overlay sets one on every object)`);
  const labels = { ...o.metadata.labels, ...(o.spec?.template?.metadata?.labels as Record<string, string> | undefined) };
  for (const [k, v] of Object.entries(labels)) {
    const [prefix, name] = k.includes('/') ? (k.split('/', 2) as [string, string]) : [undefined, k];
    if ((prefix !== undefined && !DNS_SUBDOMAIN.test(prefix)) || name.length > 63 || !LABEL_NAME.test(name)) problems.push(`${where}: label key ${k}`);
    if (typeof v !== 'string' || v.length > 63 || !LABEL_VALUE.test(v)) problems.push(`${where}: label ${k} value ${JSON.stringify(v)}`);
  }
  return problems;
}

describe.each(overlayDirs().map((d) => [path.basename(d), d]))('overlay %s', (_name, dir) => {
  const objects = loadOverlay(dir).objects;

  test('renders the kinds this deployment uses, every one of them with a schema', () => {
    const kinds = new Set(objects.map((o) => `${o.apiVersion} ${o.kind}`));
    for (const k of [
      'apps/v1 Deployment',
      'batch/v1 Job',
      'v1 Service',
      'v1 ConfigMap',
      'v1 Secret',
      'autoscaling/v2 HorizontalPodAutoscaler',
      'policy/v1 PodDisruptionBudget',
      'networking.k8s.io/v1 NetworkPolicy',
      'keda.sh/v1alpha1 ScaledObject',
      'keda.sh/v1alpha1 TriggerAuthentication',
      'monitoring.coreos.com/v1 PodMonitor',
      'monitoring.coreos.com/v1 PrometheusRule',
    ]) {
      expect([k, kinds.has(k)]).toEqual([k, true]);
    }
  });

  test('every object passes its OpenAPI schema with strict field validation', () => {
    expect(schemaProblems(objects.map(asApplied))).toEqual([]);
  });

  test('names, labels and namespaces are what the API server accepts', () => {
    expect(objects.flatMap(metaProblems)).toEqual([]);
  });

  test('the migration Job is cleaned up after it finishes', () => {
    const job = objects.find((o) => o.kind === 'Job' && o.metadata.name === 'tes-migrate')!;
    // long enough to read its logs after a failed upgrade, short enough that the next apply finds none
    expect(job.spec.ttlSecondsAfterFinished).toBeGreaterThanOrEqual(3600);
    expect(job.spec.ttlSecondsAfterFinished).toBeLessThanOrEqual(7 * 86_400);
  });
});

test('the validator refuses wrong types, bad enums, unknown fields and unknown kinds', () => {
  const broken = [
    {
      apiVersion: 'batch/v1',
      kind: 'Job',
      metadata: { name: 'a' },
      spec: {
        ttlSecondAfterFinished: 60,
        template: { spec: { restartPolicy: 'Never', containers: [{ name: 'a', image: 'b', imagePullPolicy: 'Sometimes', ports: [{ containerPort: '80' }] }] } },
      },
    },
    { apiVersion: 'keda.sh/v1alpha1', kind: 'ScaledObject', metadata: { name: 's' }, spec: { scaleTargetRef: { name: 'x' }, trigers: [], triggers: [] } },
    {
      apiVersion: 'monitoring.coreos.com/v1',
      kind: 'PrometheusRule',
      metadata: { name: 'r' },
      spec: { groups: [{ name: 'g', rules: [{ alert: 'A', expr: 'up', for: '5 minutes' }] }] },
    },
    {
      apiVersion: 'monitoring.coreos.com/v1',
      kind: 'PodMonitor',
      metadata: { name: 'p' },
      spec: { selector: {}, podMetricsEndpoints: [{ port: 'metrics', intervall: '15s' }] },
    },
    { apiVersion: 'v1', kind: 'Secret', metadata: { name: 's' }, data: { KEY: 'not base64!' } },
    { apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy', metadata: { name: 'n' }, spec: { podSelector: {}, policyTypes: ['Inbound'], ingres: [] } },
    { apiVersion: 'postgresql.cnpg.io/v1', kind: 'Cluster', metadata: { name: 'c' }, spec: { instances: 'three', postgresql: { synchronus: {} } } },
    { apiVersion: 'v1', kind: 'Widget', metadata: { name: 'w' } },
  ];
  const problems = schemaProblems(broken).join('\n');
  for (const expected of [
    /Job a .*imagePullPolicy must be equal to one of the allowed values/,
    /Job a .*containerPort must be integer/,
    /Job a .*unknown field "\/spec\/ttlSecondAfterFinished"/,
    /ScaledObject s .*unknown field "\/spec\/trigers"/,
    /PrometheusRule r .*for must match pattern/,
    /PodMonitor p .*unknown field "\/spec\/podMetricsEndpoints\/0\/intervall"/,
    /Secret s .*must match format "byte"/,
    /NetworkPolicy n .*policyTypes\/0 must be equal to one of the allowed values/,
    /NetworkPolicy n .*unknown field "\/spec\/ingres"/,
    /Cluster c .*instances must be integer/,
    /Cluster c .*unknown field "\/spec\/postgresql\/synchronus"/,
    /Widget w .*no schema for v1 Widget/,
  ]) {
    expect(problems).toMatch(expected);
  }
  // a valid object (labels are a map, enumerated: not unknown fields) passes
  expect(schemaProblems([{ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'c', labels: { a: 'b' } }, data: { K: 'v' } }])).toEqual([]);
});

describe('the PostgreSQL cluster (deploy/k8s/postgres, CloudNativePG)', () => {
  const objects = load(path.join(K8S, 'postgres')).objects;
  const cluster = objects.find((o) => o.kind === 'Cluster')!;

  test('every object passes the CloudNativePG schema with strict field validation, in the data namespace', () => {
    expect(objects.map((o) => `${o.apiVersion} ${o.kind}`).sort()).toEqual(['postgresql.cnpg.io/v1 Cluster', 'postgresql.cnpg.io/v1 ScheduledBackup']);
    expect(schemaProblems(objects)).toEqual([]);
    expect(objects.flatMap(metaProblems)).toEqual([]);
    expect(new Set(objects.map((o) => o.metadata.namespace))).toEqual(new Set(['tes-data']));
  });

  test('survives a lost node without losing an acknowledged commit, and is backed up for point-in-time restore', () => {
    expect(cluster.spec.instances).toBeGreaterThanOrEqual(3);
    expect(cluster.spec.affinity).toMatchObject({ enablePodAntiAffinity: true, podAntiAffinityType: 'required' });
    // what the failover fault test runs: a commit waits for a replica
    expect(cluster.spec.postgresql.synchronous).toMatchObject({ number: 1, dataDurability: 'required' });
    expect(cluster.spec.backup.barmanObjectStore.destinationPath).toMatch(/^s3:\/\//);
    const scheduled = objects.find((o) => o.kind === 'ScheduledBackup')!;
    expect(scheduled.spec.cluster.name).toBe(cluster.metadata.name);
    expect(scheduled.spec.schedule.split(' ')).toHaveLength(6); // CloudNativePG's cron has seconds
  });

  test("deploy/README.md's point-in-time restore example is a Cluster the operator accepts, recovering from this cluster's backups", () => {
    const readme = readFileSync(path.join(K8S, '../README.md'), 'utf8');
    const block = [...readme.matchAll(/```yaml\n([\s\S]*?)```/g)].map((m) => m[1]!).find((y) => y.includes('recovery:'));
    const restored = parse(block!) as Obj;
    expect(schemaProblems([restored])).toEqual([]);
    expect(restored.spec.bootstrap.recovery.source).toBe(cluster.metadata.name);
    // the restore reads where the cluster writes, with the same credentials
    const source = (restored.spec.externalClusters as { name: string; barmanObjectStore: unknown }[]).find((e) => e.name === cluster.metadata.name);
    expect(source?.barmanObjectStore).toEqual({
      destinationPath: cluster.spec.backup.barmanObjectStore.destinationPath,
      s3Credentials: cluster.spec.backup.barmanObjectStore.s3Credentials,
    });
  });

  test('has room for the connections the services hold at the production overlay maximum scale', () => {
    const prod = loadOverlay(path.join(K8S, 'overlays', 'production')).objects;
    const poolMax = (deployment: string) => {
      const env = (prod.find((o) => o.kind === 'ConfigMap')?.data ?? {}) as Record<string, string>;
      const d = prod.find((o) => o.kind === 'Deployment' && o.metadata.name === deployment)!;
      const own = (d.spec.template.spec.containers[0].env ?? []) as { name: string; value?: string }[];
      return Number(own.find((e) => e.name === 'DB_POOL_MAX')?.value ?? env.DB_POOL_MAX ?? 10);
    };
    const maxReplicas = (deployment: string) => {
      const scaler = prod.find((o) => (o.kind === 'HorizontalPodAutoscaler' || o.kind === 'ScaledObject') && o.spec.scaleTargetRef.name === deployment);
      return Number(
        scaler?.spec.maxReplicas ?? scaler?.spec.maxReplicaCount ?? prod.find((o) => o.kind === 'Deployment' && o.metadata.name === deployment)!.spec.replicas,
      );
    };
    const deployments = prod.filter((o) => o.kind === 'Deployment').map((o) => o.metadata.name);
    // deploy/README.md's table: pool + LISTEN connections per process, 3 for the migrate Job
    const perProcess = (d: string) => (d === 'tes-gateway' ? poolMax(d) + 2 : d === 'tes-relay' ? Math.min(poolMax(d), 4) + 1 : poolMax(d));
    const total = deployments.reduce((sum, d) => sum + maxReplicas(d) * perProcess(d), 0) + 3;
    expect(total).toBe(533);
    expect(Number(cluster.spec.postgresql.parameters.max_connections)).toBeGreaterThanOrEqual(total + 50);
  });
});
