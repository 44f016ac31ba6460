import path from 'node:path';
import { find, loadOverlay, overlayDirs, resolvePort, type Container } from './contract';
import type { Obj, Tree } from './kustomize';

/**
 * The NetworkPolicies and PodDisruptionBudgets of each overlay, read the way the API server and
 * a CNI plugin apply them (networking.k8s.io/v1 semantics: a pod selected by a policy of a type
 * is isolated for that direction; traffic passes when any rule of any selecting policy admits
 * it), asked about the connections this deployment makes and must refuse.
 */

interface LabelSelector {
  matchLabels?: Record<string, string>;
  matchExpressions?: { key: string; operator: 'In' | 'NotIn' | 'Exists' | 'DoesNotExist'; values?: string[] }[];
}

/** A peer of a connection: a pod (its namespace's labels and its own), or an address outside the cluster. */
type Peer = { pod: Record<string, string>; namespace: Record<string, string> } | { ip: string };

function matches(selector: LabelSelector | undefined, labels: Record<string, string>): boolean {
  if (!selector) return false;
  for (const [k, v] of Object.entries(selector.matchLabels ?? {})) if (labels[k] !== v) return false;
  for (const e of selector.matchExpressions ?? []) {
    const has = e.key in labels;
    const inValues = has && (e.values ?? []).includes(labels[e.key]!);
    if (
      (e.operator === 'In' && !inValues) ||
      (e.operator === 'NotIn' && inValues) ||
      (e.operator === 'Exists' && !has) ||
      (e.operator === 'DoesNotExist' && has)
    )
      return false;
  }
  return true;
}

function ipv4(ip: string): number {
  return ip.split('.').reduce((n, part) => n * 256 + Number(part), 0);
}
function inCidr(ip: string, cidr: string): boolean {
  const [base, bits] = cidr.split('/') as [string, string];
  if (base.includes(':') || ip.includes(':')) return false;
  const size = 2 ** (32 - Number(bits));
  return Math.floor(ipv4(ip) / size) === Math.floor(ipv4(base) / size);
}

/** Whether a `from`/`to` list admits `peer`; `own` is the policy's namespace's labels. */
function admitsPeer(peers: Obj[] | undefined, peer: Peer, own: Record<string, string>): boolean {
  if (!peers || peers.length === 0) return true;
  return peers.some((p) => {
    if (p.ipBlock) return 'ip' in peer && inCidr(peer.ip, p.ipBlock.cidr) && !(p.ipBlock.except ?? []).some((c: string) => inCidr(peer.ip, c));
    if (!('pod' in peer)) return false;
    const namespaceOk = p.namespaceSelector ? matches(p.namespaceSelector, peer.namespace) : peer.namespace === own;
    const podOk = p.podSelector ? matches(p.podSelector, peer.pod) : true;
    return namespaceOk && podOk;
  });
}

/** Whether a `ports` list admits the port (a named port resolves on the pod that listens). */
function admitsPort(ports: Obj[] | undefined, port: number, protocol: string, listener: Container[]): boolean {
  if (!ports || ports.length === 0) return true;
  return ports.some((p) => {
    if ((p.protocol ?? 'TCP') !== protocol) return false;
    if (p.port === undefined) return true;
    const from = typeof p.port === 'string' ? resolvePort(listener, p.port) : p.port;
    return from !== undefined && port >= from && port <= (p.endPort ?? from);
  });
}

describe.each(overlayDirs().map((d) => [path.basename(d), d]))('overlay %s', (_name, dir) => {
  let tree: Tree;
  let policies: Obj[];
  // the overlay's namespace as the API server labels it (kubernetes.io/metadata.name, set on every namespace)
  let own: Record<string, string>;
  const monitoring = { 'kubernetes.io/metadata.name': 'monitoring' };
  const kubeSystem = { 'kubernetes.io/metadata.name': 'kube-system' };
  beforeAll(() => {
    tree = loadOverlay(dir);
    policies = find(tree, 'NetworkPolicy');
    own = { 'kubernetes.io/metadata.name': tree.namespace! };
  });
  const deployment = (name: string) => find(tree, 'Deployment', name)[0]!;
  const podOf = (d: Obj): Record<string, string> => d.spec.template.metadata.labels;
  const containersOf = (d: Obj): Container[] => d.spec.template.spec.containers;
  const selecting = (d: Obj, type: 'Ingress' | 'Egress') =>
    policies.filter((p) => (p.spec.policyTypes ?? ['Ingress']).includes(type) && matches(p.spec.podSelector, podOf(d)));

  /** Whether `peer` may open a connection to `d`'s pods on `port`. */
  function ingress(d: Obj, port: number, peer: Peer, protocol = 'TCP'): boolean {
    const applying = selecting(d, 'Ingress');
    if (applying.length === 0) return true;
    return applying.some((p) => (p.spec.ingress ?? []).some((r: Obj) => admitsPeer(r.from, peer, own) && admitsPort(r.ports, port, protocol, containersOf(d))));
  }
  /** Whether `d`'s pods may open a connection to `peer` on `port`. */
  function egress(d: Obj, peer: Peer, port: number, protocol = 'TCP'): boolean {
    const applying = selecting(d, 'Egress');
    if (applying.length === 0) return true;
    return applying.some((p) => (p.spec.egress ?? []).some((r: Obj) => admitsPeer(r.to, peer, own) && admitsPort(r.ports, port, protocol, [])));
  }

  const internet = { ip: '203.0.113.7' };
  const prometheus: Peer = { pod: { 'app.kubernetes.io/name': 'prometheus' }, namespace: monitoring };
  const ingressController: Peer = { pod: { 'app.kubernetes.io/name': 'ingress-nginx' }, namespace: { 'kubernetes.io/metadata.name': 'ingress-nginx' } };
  const elsewhere: Peer = { pod: { app: 'anything' }, namespace: { 'kubernetes.io/metadata.name': 'default' } };

  test('every pod of the deployment is isolated both ways: nothing reaches it or leaves it unless a policy says so', () => {
    const pods = [...find(tree, 'Deployment'), ...find(tree, 'Job')];
    expect(pods.length).toBeGreaterThanOrEqual(6);
    const problems: string[] = [];
    for (const d of pods) {
      if (selecting(d, 'Ingress').length === 0) problems.push(`${d.kind} ${d.metadata.name}: no Ingress policy`);
      if (selecting(d, 'Egress').length === 0) problems.push(`${d.kind} ${d.metadata.name}: no Egress policy`);
    }
    expect(problems).toEqual([]);
  });

  test("ingress: the gateway's API port from anywhere; every metrics port from the monitoring namespace only; nothing else", () => {
    const gateway = deployment('tes-gateway');
    const http = resolvePort(containersOf(gateway), 'http')!;
    const metrics = resolvePort(containersOf(gateway), 'metrics')!;
    expect([ingress(gateway, http, internet), ingress(gateway, http, ingressController), ingress(gateway, http, elsewhere)]).toEqual([true, true, true]);
    for (const d of find(tree, 'Deployment')) {
      const port = resolvePort(containersOf(d), 'metrics')!;
      const name = d.metadata.name;
      expect([name, ingress(d, port, prometheus), ingress(d, port, internet), ingress(d, port, elsewhere), ingress(d, port, prometheus, 'UDP')]).toEqual([
        name,
        true,
        false,
        false,
        false,
      ]);
      // a neighbour in the same namespace (another tes pod) reaches no other port
      const neighbour: Peer = { pod: podOf(gateway), namespace: own };
      for (const other of [22, 5432, 8081]) expect([name, other, ingress(d, other, neighbour)]).toEqual([name, other, false]);
      if (name !== 'tes-gateway') expect([name, ingress(d, http, internet)]).toEqual([name, false]);
    }
    expect(metrics).toBe(resolvePort(containersOf(deployment('tes-relay')), 'metrics'));
  });

  test("egress: DNS, and the ports of the overlay's own PostgreSQL, RabbitMQ and S3 endpoints and of the providers (HTTPS); webhooks from the relay to any address", () => {
    const secret = find(tree, 'Secret', 'tes-secrets')[0]!.data as Record<string, string>;
    const config = find(tree, 'ConfigMap', 'tes-config')[0]!.data as Record<string, string>;
    const portOf = (url: string, defaults: Record<string, number>) => {
      const u = new URL(url);
      return u.port ? Number(u.port) : defaults[u.protocol]!;
    };
    const postgres = portOf(secret.DATABASE_URL!, { 'postgres:': 5432, 'postgresql:': 5432 });
    const amqp = portOf(secret.AMQP_URL!, { 'amqp:': 5672, 'amqps:': 5671 });
    const s3 = portOf(config.S3_ENDPOINT!, { 'https:': 443, 'http:': 80 });
    const inCluster = { ip: '10.0.3.4' };
    const kubeDns: Peer = { pod: { 'k8s-app': 'kube-dns' }, namespace: kubeSystem };
    const provider = { ip: '52.20.1.1' };
    for (const d of [...find(tree, 'Deployment'), ...find(tree, 'Job')]) {
      const name = d.metadata.name;
      const can = (peer: Peer, port: number, protocol = 'TCP') => [name, port, protocol, egress(d, peer, port, protocol)];
      expect(can(kubeDns, 53, 'UDP')).toEqual([name, 53, 'UDP', true]);
      expect(can(kubeDns, 53)).toEqual([name, 53, 'TCP', true]);
      expect(can(inCluster, postgres)).toEqual([name, postgres, 'TCP', true]);
      if (d.kind === 'Job') continue;
      expect(can(inCluster, amqp)).toEqual([name, amqp, 'TCP', true]);
      expect(can(inCluster, 5671)).toEqual([name, 5671, 'TCP', true]);
      expect(can(provider, s3)).toEqual([name, s3, 'TCP', true]);
      expect(can(provider, 443)).toEqual([name, 443, 'TCP', true]);
      // webhook receivers are anywhere, on any port: the relay delivers them, no one else
      const relay = name === 'tes-relay';
      expect(can(internet, 8443)).toEqual([name, 8443, 'TCP', relay]);
      expect(can({ ip: '198.51.100.9' }, 80)).toEqual([name, 80, 'TCP', relay]);
      expect(can(elsewhere, 6379)).toEqual([name, 6379, 'TCP', relay]);
    }
  });
});

describe.each(overlayDirs().map((d) => [path.basename(d), d]))('overlay %s', (_name, dir) => {
  test('every worker Deployment has its own PodDisruptionBudget: a drain evicts one of its pods at a time, and never blocks', () => {
    const tree = loadOverlay(dir);
    const workers = find(tree, 'Deployment').filter((d) => d.metadata.labels?.['app.kubernetes.io/component'] === 'worker');
    expect(workers.length).toBeGreaterThanOrEqual(3);
    for (const w of workers) {
      const budgets = find(tree, 'PodDisruptionBudget').filter((p) => matches(p.spec.selector, w.spec.template.metadata.labels));
      // maxUnavailable 1, not a minAvailable: KEDA may hold a category at one replica, and a
      // minAvailable of 1 would keep that node from ever draining
      expect([w.metadata.name, budgets.map((b) => b.spec)]).toEqual([
        w.metadata.name,
        [{ maxUnavailable: 1, selector: { matchLabels: w.spec.selector.matchLabels } }],
      ]);
    }
  });
});
