import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parse } from 'yaml';
import { loadConfig } from '@tes/config';
import { contractVariables } from './contract';
import { dockerTargets, effective, parseDockerfile } from './dockerfile';
import { REPO } from './kustomize';

/**
 * docker/compose.yaml (no Docker engine here, so read, not run): every service the stack needs,
 * health checks, start order, and the environment of gateway/worker/relay pointing at the
 * compose services with the credentials those services are given.
 */

type Service = Record<string, any>;
const COMPOSE = path.join(REPO, 'docker/compose.yaml');
const APPS = ['gateway', 'worker', 'relay'];
let services: Record<string, Service>;

/** Compose interpolation with the variables unset: ${X:-default} -> default, ${X} -> ''. */
function interpolate(v: unknown): string {
  return String(v).replace(/\$\{[A-Z0-9_]+(?::?-([^}]*))?\}/g, (_m, d: string | undefined) => d ?? '');
}
const envOf = (s: Service): Record<string, string> => Object.fromEntries(Object.entries(s.environment ?? {}).map(([k, v]) => [k, interpolate(v)]));

beforeAll(() => {
  const doc = parse(readFileSync(COMPOSE, 'utf8'), { merge: true }) as { services: Record<string, Service> };
  services = doc.services;
});

test('the stack has PostgreSQL, RabbitMQ with management, an S3 store, a migration and the three services', () => {
  for (const s of ['postgres', 'rabbitmq', 'minio', 'minio-init', 'migrate', ...APPS]) expect(services).toHaveProperty(s);
  expect(services.rabbitmq!.image).toMatch(/^rabbitmq:[\w.-]*management/);
  expect(services.postgres!.image).toMatch(/^postgres:/);
});

test('each image built from docker/Dockerfile names an existing target; migrate runs admin migrate', () => {
  const df = parseDockerfile();
  const targets = dockerTargets(df);
  for (const name of ['migrate', ...APPS]) {
    const b = services[name]!.build;
    expect(path.resolve(path.dirname(COMPOSE), b.context, b.dockerfile)).toBe(path.join(REPO, 'docker/Dockerfile'));
    expect(targets).toContain(b.target);
  }
  const admin = effective(df, services.migrate!.build.target);
  const entry = admin.command.slice(0, admin.command.length - 1);
  expect([...entry, ...services.migrate!.command]).toEqual(['node', 'services/admin/dist/main.js', 'migrate']);
});

test('every long-running service has a health check; the services report /readyz on METRICS_PORT', () => {
  for (const [name, s] of Object.entries(services)) {
    if (s.restart === 'no') continue; // one-shot jobs
    expect([name, Array.isArray(s.healthcheck?.test) && s.healthcheck.test.length > 1]).toEqual([name, true]);
  }
  for (const name of APPS) {
    const port = envOf(services[name]!).METRICS_PORT;
    expect(services[name]!.healthcheck.test.join(' ')).toContain(`127.0.0.1:${port}/readyz`);
  }
});

test('start order: services wait for healthy dependencies, the bucket and a finished migration', () => {
  const problems: string[] = [];
  for (const [name, s] of Object.entries(services)) {
    for (const [dep, cond] of Object.entries((s.depends_on ?? {}) as Record<string, { condition: string }>)) {
      const target = services[dep];
      if (!target) problems.push(`${name} depends on missing ${dep}`);
      else if (cond.condition === 'service_healthy' && !target.healthcheck) problems.push(`${name} waits for ${dep} to be healthy, but it has no health check`);
      else if (cond.condition === 'service_completed_successfully' && target.restart !== 'no')
        problems.push(`${name} waits for ${dep} to complete, but it restarts`);
      else if (!['service_healthy', 'service_completed_successfully'].includes(cond.condition)) problems.push(`${name} -> ${dep}: condition ${cond.condition}`);
    }
  }
  expect(problems).toEqual([]);
  for (const name of APPS) {
    expect(services[name]!.depends_on).toMatchObject({
      postgres: { condition: 'service_healthy' },
      rabbitmq: { condition: 'service_healthy' },
      migrate: { condition: 'service_completed_successfully' },
      'minio-init': { condition: 'service_completed_successfully' },
    });
  }
  expect(services.migrate!.depends_on).toMatchObject({ postgres: { condition: 'service_healthy' } });
});

test('gateway, worker, relay and migrate get every contract variable and a valid config', () => {
  const contract = contractVariables();
  for (const name of ['migrate', ...APPS]) {
    const env = envOf(services[name]!);
    expect([name, [...contract].filter((v) => !(v in env))]).toEqual([name, []]);
    expect([name, Object.keys(env).filter((k) => !contract.has(k))]).toEqual([name, []]);
    expect(() => loadConfig(env)).not.toThrow();
  }
});

test('the environment points at the compose services with the credentials they were given', () => {
  const env = envOf(services.gateway!);
  const config = loadConfig(env);
  const pg = envOf(services.postgres!);
  const db = new URL(config.databaseUrl);
  expect([db.hostname, db.port, db.username, db.password, db.pathname]).toEqual([
    'postgres',
    '5432',
    pg.POSTGRES_USER,
    pg.POSTGRES_PASSWORD,
    `/${pg.POSTGRES_DB}`,
  ]);
  const mq = envOf(services.rabbitmq!);
  const amqp = new URL(config.amqpUrl);
  expect([amqp.hostname, amqp.port || '5672', amqp.username, amqp.password]).toEqual(['rabbitmq', '5672', mq.RABBITMQ_DEFAULT_USER, mq.RABBITMQ_DEFAULT_PASS]);
  const s3 = envOf(services.minio!);
  expect(new URL(config.s3.endpoint).hostname).toBe('minio');
  expect([config.s3.accessKeyId, config.s3.secretAccessKey]).toEqual([s3.MINIO_ROOT_USER, s3.MINIO_ROOT_PASSWORD]);
  // downloads: the public endpoint's port is published by the S3 store
  const publicPort = new URL(config.s3.publicEndpoint).port;
  expect(services.minio!.ports.some((p: string) => p.endsWith(`:${publicPort}:9000`))).toBe(true);
  // the bucket the services use is the one minio-init creates, with the same credentials
  const init = services['minio-init']!.command.join(' ');
  expect(init).toContain(`local/${config.s3.bucket}`);
  expect(init).toContain(`${config.s3.accessKeyId} ${config.s3.secretAccessKey}`);
  expect(config.enableTestTools).toBe(false);
});

test('Docker waits longer than the drain deadline before SIGKILL', () => {
  for (const name of APPS) {
    const grace = /^(\d+)s$/.exec(services[name]!.stop_grace_period)?.[1];
    expect(Number(grace)).toBeGreaterThan(loadConfig(envOf(services[name]!)).shutdownTimeoutMs / 1000);
  }
});

test('each service publishes its metrics port (METRICS_PORT inside) on a host port of its own, on loopback only', () => {
  const hostPorts: string[] = [];
  for (const name of APPS) {
    const inside = envOf(services[name]!).METRICS_PORT;
    const mapping = (services[name]!.ports ?? []).map(String).find((p: string) => p.endsWith(`:${inside}`) && !p.endsWith(`:${envOf(services[name]!).PORT}`));
    expect([name, mapping]).toEqual([name, expect.stringMatching(/^127\.0\.0\.1:\d+:\d+$/)]);
    hostPorts.push(mapping.split(':')[1]);
  }
  expect(new Set(hostPorts).size).toBe(APPS.length);
});
