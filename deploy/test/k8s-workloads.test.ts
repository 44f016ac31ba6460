import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { Catalog, drainNeededMs, longestWorkerSteps, MAX_DRAIN_STEP_MS, RELEASE_ALLOWANCE_MS } from '@tes/catalog';
import { topologyNames } from '@tes/messaging';
import { configOf, containerEnv, find, loadOverlay, overlayDirs, podTemplates, resolvePort, type Container } from './contract';
import { quantity, selects, type Obj, type Tree } from './kustomize';

/**
 * The Kubernetes workloads of each overlay, checked against each other and against the code:
 * selectors, ports, probes, autoscaling, drain time, resources, privileges, and the KEDA
 * triggers against the real queue names (libs/messaging topologyNames) and the real catalog.
 */
describe.each(overlayDirs().map((d) => [path.basename(d), d]))('overlay %s', (_name, dir) => {
  let tree: Tree;
  let deployments: Obj[];
  beforeAll(() => {
    tree = loadOverlay(dir);
    deployments = find(tree, 'Deployment');
  });
  const podLabels = (d: Obj): Record<string, string> => d.spec.template.metadata.labels ?? {};
  const config = (d: Obj, c: Container) => configOf(containerEnv(tree, c, `${d.metadata.name}/${c.name}`, []));

  test('each Deployment selects its own pods and no other Deployment’s', () => {
    const problems: string[] = [];
    expect(deployments.length).toBeGreaterThanOrEqual(5);
    for (const d of deployments) {
      if (!selects(d.spec.selector?.matchLabels, podLabels(d))) problems.push(`${d.metadata.name}: selector does not match its pod labels`);
      for (const other of deployments) {
        if (other !== d && selects(d.spec.selector?.matchLabels, podLabels(other)))
          problems.push(`${d.metadata.name}: selector also matches ${other.metadata.name}'s pods`);
      }
    }
    expect(problems).toEqual([]);
  });

  test('Services, PodDisruptionBudgets and the PodMonitor select existing pods on existing ports', () => {
    const problems: string[] = [];
    const selected = (sel: Record<string, string> | undefined) => deployments.filter((d) => selects(sel, podLabels(d)));
    for (const s of find(tree, 'Service')) {
      const targets = selected(s.spec.selector);
      if (targets.length !== 1) problems.push(`Service ${s.metadata.name} selects ${targets.length} Deployments`);
      for (const d of targets) {
        for (const p of s.spec.ports) {
          if (resolvePort(d.spec.template.spec.containers, p.targetPort) === undefined)
            problems.push(`Service ${s.metadata.name}: targetPort ${p.targetPort} is not a port of ${d.metadata.name}`);
        }
      }
    }
    for (const pdb of find(tree, 'PodDisruptionBudget')) {
      if (selected(pdb.spec.selector?.matchLabels).length !== 1) problems.push(`PDB ${pdb.metadata.name} must select exactly one Deployment`);
    }
    const monitors = find(tree, 'PodMonitor');
    expect(monitors.length).toBeGreaterThan(0);
    for (const m of monitors) {
      for (const d of deployments) {
        if (!selects(m.spec.selector.matchLabels, podLabels(d))) problems.push(`PodMonitor ${m.metadata.name} does not scrape ${d.metadata.name}`);
        for (const ep of m.spec.podMetricsEndpoints) {
          if (resolvePort(d.spec.template.spec.containers, ep.port) === undefined) problems.push(`${d.metadata.name} has no port ${ep.port} to scrape`);
        }
      }
    }
    expect(problems).toEqual([]);
  });

  test('the gateway listens on PORT behind its Service; every process probes /healthz and /readyz on METRICS_PORT', () => {
    const problems: string[] = [];
    const gateway = find(tree, 'Service', 'tes-gateway')[0];
    const gw = find(tree, 'Deployment', 'tes-gateway')[0]!;
    const gwc = gw.spec.template.spec.containers[0];
    const http = gateway?.spec.ports.find((p: { name: string }) => p.name === 'http');
    expect(resolvePort(gw.spec.template.spec.containers, http?.targetPort)).toBe(config(gw, gwc).port);
    for (const d of deployments) {
      for (const c of d.spec.template.spec.containers) {
        const cfg = config(d, c);
        const where = `${d.metadata.name}/${c.name}`;
        const probes: [string, string][] = [
          ['livenessProbe', '/healthz'],
          ['readinessProbe', '/readyz'],
          ['startupProbe', '/healthz'],
        ];
        for (const [kind, pathWanted] of probes) {
          const probe = c[kind];
          if (!probe) {
            if (kind !== 'startupProbe') problems.push(`${where}: no ${kind}`);
            continue;
          }
          if (probe.httpGet?.path !== pathWanted) problems.push(`${where}: ${kind} path ${probe.httpGet?.path}, expected ${pathWanted}`);
          const port = resolvePort([c], probe.httpGet?.port);
          if (port !== cfg.metricsPort) problems.push(`${where}: ${kind} port ${port} is not METRICS_PORT ${cfg.metricsPort}`);
        }
      }
    }
    expect(problems).toEqual([]);
  });

  test('autoscaled Deployments leave replicas to their autoscaler; the PDB never blocks a drain', () => {
    const problems: string[] = [];
    const scaled = new Map<string, string>();
    for (const h of find(tree, 'HorizontalPodAutoscaler')) scaled.set(h.spec.scaleTargetRef.name, `HPA ${h.metadata.name}`);
    for (const so of find(tree, 'ScaledObject')) {
      if (scaled.has(so.spec.scaleTargetRef.name)) problems.push(`${so.spec.scaleTargetRef.name} has two autoscalers`);
      scaled.set(so.spec.scaleTargetRef.name, `ScaledObject ${so.metadata.name}`);
    }
    for (const [name, by] of scaled) {
      const d = find(tree, 'Deployment', name)[0];
      if (!d) problems.push(`${by} targets a missing Deployment ${name}`);
      else if (d.spec.replicas !== undefined) problems.push(`${name} sets replicas although ${by} owns them`);
    }
    for (const h of find(tree, 'HorizontalPodAutoscaler')) {
      const target = find(tree, 'Deployment', h.spec.scaleTargetRef.name)[0];
      for (const pdb of find(tree, 'PodDisruptionBudget')) {
        if (target && selects(pdb.spec.selector.matchLabels, podLabels(target)) && pdb.spec.minAvailable >= h.spec.minReplicas) {
          problems.push(`PDB ${pdb.metadata.name} minAvailable ${pdb.spec.minAvailable} >= HPA minReplicas ${h.spec.minReplicas}: drains would block`);
        }
      }
    }
    expect(problems).toEqual([]);
  });

  test('one KEDA-scaled worker per catalog category, each on its real queue', () => {
    const problems: string[] = [];
    const auths = find(tree, 'TriggerAuthentication');
    const workerCategories: string[] = [];
    const workers = deployments.filter((d) => d.spec.template.spec.containers.some((c: Container) => c.image === 'tes-worker'));
    for (const d of workers) {
      const c = d.spec.template.spec.containers[0];
      const cfg = config(d, c);
      if (cfg.workerQueues.length !== 1) problems.push(`${d.metadata.name}: WORKER_QUEUES must name one category, got ${cfg.workerQueues.join(',')}`);
      const category = cfg.workerQueues[0]!;
      workerCategories.push(category);
      const scalers = find(tree, 'ScaledObject').filter((so) => so.spec.scaleTargetRef.name === d.metadata.name);
      if (scalers.length !== 1) {
        problems.push(`${d.metadata.name}: ${scalers.length} ScaledObjects`);
        continue;
      }
      const so = scalers[0]!;
      if (so.spec.scaleTargetRef.kind !== undefined && so.spec.scaleTargetRef.kind !== 'Deployment')
        problems.push(`${so.metadata.name}: target kind ${so.spec.scaleTargetRef.kind}`);
      for (const t of so.spec.triggers) {
        const queue = topologyNames(cfg.amqpPrefix).queueFor(category);
        if (t.type !== 'rabbitmq') problems.push(`${so.metadata.name}: trigger type ${t.type}`);
        if (t.metadata.queueName !== queue) problems.push(`${so.metadata.name}: watches ${t.metadata.queueName}, the worker consumes ${queue}`);
        if (t.metadata.mode !== 'QueueLength' || t.metadata.protocol !== 'http')
          problems.push(`${so.metadata.name}: expected mode QueueLength over protocol http`);
        if (!/^\d+$/.test(t.metadata.value) || Number(t.metadata.value) < cfg.workerConcurrency) {
          problems.push(`${so.metadata.name}: target ${t.metadata.value} per replica is below WORKER_CONCURRENCY ${cfg.workerConcurrency}`);
        }
        const auth = auths.find((a) => a.metadata.name === t.authenticationRef?.name);
        if (!auth) problems.push(`${so.metadata.name}: TriggerAuthentication ${t.authenticationRef?.name} does not exist`);
        for (const ref of auth?.spec.secretTargetRef ?? []) {
          const secret = find(tree, 'Secret', ref.name)[0];
          if (!secret || !(ref.key in secret.data)) problems.push(`TriggerAuthentication ${auth!.metadata.name}: Secret ${ref.name} has no key ${ref.key}`);
        }
      }
      if (so.spec.minReplicaCount < 1 || so.spec.maxReplicaCount < so.spec.minReplicaCount)
        problems.push(`${so.metadata.name}: replica bounds ${so.spec.minReplicaCount}..${so.spec.maxReplicaCount}`);
    }
    const cfg0 = config(workers[0]!, workers[0]!.spec.template.spec.containers[0]);
    const catalog = new Catalog({ enableTestTools: cfg0.enableTestTools, providers: { replicate: true, fal: true, openai: true } });
    expect(cfg0.enableTestTools).toBe(false);
    expect(problems).toEqual([]);
    expect([...workerCategories].sort()).toEqual(catalog.categories().sort());
    expect(workerCategories).not.toContain('test');
  });

  test('terminationGracePeriodSeconds exceeds preStop plus the SHUTDOWN_TIMEOUT_MS drain', () => {
    const problems: string[] = [];
    for (const d of deployments) {
      const spec = d.spec.template.spec;
      for (const c of spec.containers) {
        const cmd: string[] = c.lifecycle?.preStop?.exec?.command ?? [];
        const preStop = cmd[0] === 'sleep' ? Number(cmd[1]) : 0;
        const needed = preStop + config(d, c).shutdownTimeoutMs / 1000;
        if (!(spec.terminationGracePeriodSeconds > needed)) problems.push(`${d.metadata.name}: grace ${spec.terminationGracePeriodSeconds}s <= ${needed}s`);
      }
    }
    expect(problems).toEqual([]);
  });

  // A rollout or scale-in lets the steps a worker is running finish: its drain (SHUTDOWN_TIMEOUT_MS
  // − 5 s) covers the longest step its category can hold, from the catalog's plans at the
  // arguments' limits (capped at 15 min), and the kubelet's grace covers the drain with margin.
  test("each worker's drain covers its category's longest step, and its grace covers the drain", () => {
    const problems: string[] = [];
    const workers = deployments.filter((d) => d.spec.template.spec.containers.some((c: Container) => c.image === 'tes-worker'));
    expect(workers.length).toBeGreaterThan(0);
    for (const d of workers) {
      const c = d.spec.template.spec.containers[0];
      const cfg = config(d, c);
      const needed = drainNeededMs(cfg.workerQueues);
      const drain = cfg.shutdownTimeoutMs - RELEASE_ALLOWANCE_MS;
      if (drain < needed)
        problems.push(`${d.metadata.name}: drains ${drain / 1000}s (SHUTDOWN_TIMEOUT_MS ${cfg.shutdownTimeoutMs}), its steps need ${needed / 1000}s`);
      const grace = d.spec.template.spec.terminationGracePeriodSeconds;
      if (!(grace >= cfg.shutdownTimeoutMs / 1000 + 10)) problems.push(`${d.metadata.name}: grace ${grace}s is not 10 s above SHUTDOWN_TIMEOUT_MS`);
      // a drain far above the need holds a node drain for nothing
      if (drain > needed + 60_000) problems.push(`${d.metadata.name}: drains ${drain / 1000}s, a minute more than its steps need (${needed / 1000}s)`);
      // scale-in takes one pod at a time, a minute apart: each removed pod drains on its own
      for (const so of find(tree, 'ScaledObject').filter((o) => o.spec.scaleTargetRef.name === d.metadata.name)) {
        const down = so.spec.advanced?.horizontalPodAutoscalerConfig?.behavior?.scaleDown;
        const policies: { type: string; value: number; periodSeconds: number }[] = down?.policies ?? [];
        if (policies.length === 0 || policies.some((p) => p.type !== 'Pods' || p.value !== 1 || p.periodSeconds < 60))
          problems.push(`${so.metadata.name}: scale-in must remove at most one pod per 60 s`);
      }
    }
    expect(problems).toEqual([]);
  });

  test('a category whose longest step is over the cap is named in deploy/README.md (its longer steps are rerun after a rollout)', () => {
    const readme = fs.readFileSync(path.join(__dirname, '..', 'README.md'), 'utf8');
    for (const s of longestWorkerSteps().values()) {
      if (s.category === 'test' || s.timeoutMs <= MAX_DRAIN_STEP_MS) continue;
      expect(readme).toContain(`${s.tool} ${s.step}`);
    }
  });

  test('every container has cpu and memory requests and limits, requests <= limits', () => {
    const problems: string[] = [];
    for (const { owner, pod } of podTemplates(tree)) {
      for (const c of [...(pod.spec.initContainers ?? []), ...pod.spec.containers]) {
        for (const r of ['cpu', 'memory']) {
          const req = c.resources?.requests?.[r];
          const lim = c.resources?.limits?.[r];
          if (req === undefined || lim === undefined) problems.push(`${owner.metadata.name}/${c.name}: ${r} request and limit required`);
          else if (quantity(req) > quantity(lim)) problems.push(`${owner.metadata.name}/${c.name}: ${r} request ${req} > limit ${lim}`);
        }
      }
    }
    expect(problems).toEqual([]);
  });

  test('every long-running node process caps its heap well inside its memory limit; the gateway leaves room for its uploads', () => {
    const problems: string[] = [];
    for (const { owner, pod } of podTemplates(tree)) {
      if (owner.kind !== 'Deployment') continue;
      for (const c of pod.spec.containers) {
        const env = containerEnv(tree, c, owner.metadata.name, problems);
        const options = env.get('NODE_OPTIONS')?.value ?? '';
        const heapMb = Number(/--max-old-space-size=(\d+)/.exec(options)?.[1] ?? NaN);
        const limitMb = quantity(c.resources.limits.memory) / 2 ** 20;
        if (!(heapMb > 0)) problems.push(`${owner.metadata.name}/${c.name}: NODE_OPTIONS sets no --max-old-space-size`);
        // The whole heap, as this node sizes it from these options: the old space's cap is not
        // all of it. The young generation comes on top (Node 24's grows to 3 × 64 MB unless
        // --max-semi-space-size bounds it), and a relay capped at 128 MB grew to 248 MB RSS.
        const v8LimitMb = heapSizeLimitMb(options);
        if (v8LimitMb > 0.6 * limitMb)
          problems.push(`${owner.metadata.name}/${c.name}: V8 heap limit ${v8LimitMb} MB (${options}) > 60% of the ${limitMb} MiB limit`);
        if (owner.metadata.name === 'tes-gateway') {
          // an upload holds ≈ 4 × its 16 MiB body while it is read (64 MiB), beside ≈ 64 MiB of the rest
          const uploads = configOf(env).uploadConcurrency;
          if (heapMb < 64 + 64 * uploads) problems.push(`tes-gateway: heap ${heapMb} MB < 64 + 64 × UPLOAD_CONCURRENCY ${uploads}`);
        }
      }
    }
    expect(problems).toEqual([]);
  });

  /** heap_size_limit of a node started with these NODE_OPTIONS (MB): old space plus the young generation's reservation. */
  function heapSizeLimitMb(nodeOptions: string): number {
    const out = execFileSync(process.execPath, ['-e', "process.stdout.write(String(require('v8').getHeapStatistics().heap_size_limit))"], {
      env: { PATH: process.env.PATH, NODE_OPTIONS: nodeOptions },
      encoding: 'utf8',
    });
    return Math.round(Number(out) / 2 ** 20);
  }

  test('pods run as non-root, without privilege escalation, on a read-only root with /tmp writable', () => {
    const problems: string[] = [];
    for (const { owner, pod } of podTemplates(tree)) {
      const sc = pod.spec.securityContext ?? {};
      if (sc.runAsNonRoot !== true || !(sc.runAsUser > 0)) problems.push(`${owner.metadata.name}: pod must set runAsNonRoot and a non-zero runAsUser`);
      if (pod.spec.automountServiceAccountToken !== false) problems.push(`${owner.metadata.name}: mounts a service account token`);
      const volumes = new Set((pod.spec.volumes ?? []).map((v: { name: string }) => v.name));
      for (const c of pod.spec.containers) {
        const csc = c.securityContext ?? {};
        if (csc.allowPrivilegeEscalation !== false || csc.readOnlyRootFilesystem !== true || !csc.capabilities?.drop?.includes('ALL')) {
          problems.push(`${owner.metadata.name}/${c.name}: needs allowPrivilegeEscalation false, readOnlyRootFilesystem, drop ALL`);
        }
        for (const m of c.volumeMounts ?? []) if (!volumes.has(m.name)) problems.push(`${owner.metadata.name}/${c.name}: mounts undeclared volume ${m.name}`);
        const long = owner.kind === 'Deployment';
        if (long && !(c.volumeMounts ?? []).some((m: { mountPath: string }) => m.mountPath === '/tmp'))
          problems.push(`${owner.metadata.name}/${c.name}: no writable /tmp`);
      }
    }
    expect(problems).toEqual([]);
  });
});
