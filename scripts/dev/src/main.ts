/**
 * `npm start`: the development stack on one machine. See help.ts for what it does, and
 * the files named after each part for how: postgres.ts, s3.ts, children.ts, seed.ts.
 *
 * Invariant: every resource is registered with the Lifecycle as soon as it exists, and
 * the only way out is lifecycle.finished, so no exit path leaves a child, an embedded
 * Postgres or the S3 port behind.
 */
import { splitAmqpUrls } from '@tes/config';
import { Services, type ServiceSpec } from './children';
import { exampleText, fetchQuote } from './example';
import { HELP } from './help';
import { Lifecycle, Stopping } from './lifecycle';
import { DevError, redactUrl, say } from './output';
import { freePort, isPortFree } from './ports';
import { prepareDatabase, resolveDatabaseUrl } from './postgres';
import { checkRabbitMq } from './rabbitmq';
import { prepareStorage } from './s3';
import { devSeed } from './seed';
import { DEV_DEFAULTS, readSettings } from './settings';

const SERVICES = ['gateway', 'worker', 'relay'] as const;
/** Each service's compiled main.js, resolved when it starts (a missing build fails there, with its name). */
const MAIN: Record<(typeof SERVICES)[number], () => string> = {
  gateway: () => require.resolve('@tes/gateway'),
  worker: () => require.resolve('@tes/worker'),
  relay: () => require.resolve('@tes/relay'),
};
const READY_TIMEOUT_MS = 90_000;

async function metricsPorts(base: number): Promise<number[]> {
  if (base === 0) return Promise.all(SERVICES.map(() => freePort()));
  return SERVICES.map((_, i) => base + i);
}

/** Fails with one message naming every port that is taken, before anything starts. */
async function checkPorts(ports: { port: number; what: string }[]): Promise<void> {
  const taken: { port: number; what: string }[] = [];
  for (const p of ports) if (!(await isPortFree(p.port))) taken.push(p);
  if (taken.length > 0) {
    throw new DevError(
      `${taken.map((p) => `port ${p.port} (${p.what})`).join(', ')} already in use.\n` +
        `  Stop what listens there (\`ss -ltnp 'sport = :${taken[0]?.port}'\` shows it; an earlier npm start?), or choose other ports with PORT / METRICS_PORT.`,
    );
  }
}

async function run(lifecycle: Lifecycle): Promise<void> {
  const died = (name: string, how: string): void => {
    if (lifecycle.isStopping) return;
    say.error(`${name} exited unexpectedly (${how}); stopping the rest`);
    void lifecycle.shutdown(`${name} exited`, 1);
  };

  const settings = readSettings(process.env);
  const { config } = settings;
  const mports = await metricsPorts(config.metricsPort);
  await checkPorts([
    { port: config.port, what: 'PORT, the gateway' },
    ...SERVICES.map((s, i) => ({ port: mports[i]!, what: `METRICS_PORT${i ? ` + ${i}` : ''}, ${s} metrics` })),
  ]);

  const reached = await checkRabbitMq(splitAmqpUrls(config.amqpUrl));
  say.info(`RabbitMQ: reachable at ${redactUrl(reached)}`);
  lifecycle.check();

  const databaseUrl = await resolveDatabaseUrl(settings, lifecycle, (how) => died('embedded Postgres', how));
  lifecycle.check();
  await prepareDatabase(databaseUrl);
  lifecycle.check();

  const storageEnv = await prepareStorage(settings, lifecycle);
  lifecycle.check();

  const env: Record<string, string> = { ...settings.baseEnv, DATABASE_URL: databaseUrl, ...storageEnv };
  const seed = await devSeed(env);
  say.info(`seeded project ${seed.projectId} with key ${seed.keyId}`);
  lifecycle.check();

  const services = new Services(died);
  await lifecycle.add({ name: 'services', stop: () => services.stop(settings.childStopDeadlineMs), force: () => services.force() });
  SERVICES.forEach((name, i) => {
    const spec: ServiceSpec = {
      name,
      script: MAIN[name](),
      env: { ...env, METRICS_PORT: String(mports[i]) },
      readyUrl: `http://127.0.0.1:${mports[i]}/readyz`,
    };
    services.start(spec);
  });
  say.info(`starting ${SERVICES.join(', ')} (metrics/health on ports ${mports.join(', ')})`);
  if (!(await services.waitReady(READY_TIMEOUT_MS, () => lifecycle.isStopping))) return;

  const baseUrl = `http://127.0.0.1:${config.port}`;
  const quote = await fetchQuote(baseUrl, seed.secret);
  lifecycle.check();
  say.raw(exampleText({ baseUrl, key: seed, nodeEnv: config.nodeEnv, quote, idempotencyKey: `dev-example-${Date.now().toString(36)}` }));
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  if (args.includes('--help') || args.includes('-h')) {
    process.stdout.write(`${HELP}\n`);
    return;
  }
  if (args.length > 0) {
    process.stderr.write(`unknown argument: ${args[0]}\nrun with --help for what this does\n`);
    process.exit(2);
  }

  // this process makes an S3 client too (the bucket check): same default as the children
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= DEV_DEFAULTS.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED;
  const lifecycle = new Lifecycle();
  lifecycle.installSignalHandlers();
  try {
    await run(lifecycle);
  } catch (err) {
    if (!(err instanceof Stopping) && !lifecycle.isStopping) {
      say.error(err instanceof DevError ? err.message : ((err as Error).stack ?? String(err)));
      void lifecycle.shutdown('startup failed', 1);
    }
  }
  process.exit(await lifecycle.finished);
}

void main();
