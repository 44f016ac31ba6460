import { revokeApiKey } from '@tes/db';
import { addKey, seedProject, startTcpRelay, type TcpRelay } from '@tes/testing';
import { FaultClient, type Submission } from './client';
import { assertFreshBuild, Cluster, httpStatus, SERVICES, sleep, type ServiceName, type ServiceProcess } from './cluster';
import { checkInvariants, waitForEnd } from './invariants';
import { PostgresPair, type Node } from './postgres-pair';

/**
 * PostgreSQL fails over from its primary to a streaming replica under load (`npm run
 * test:faults` only; about a minute). The pair is this suite's own (postgres-pair.ts): a
 * primary and a `pg_basebackup -R` replica on this machine, with synchronous replication
 * (`synchronous_commit = on`, the replica in `synchronous_standby_names`), as the deploy
 * docs' CloudNativePG cluster runs it. The services reach the database through one stable
 * address, a TCP relay standing for the `-rw` Service (or the VIP) that CloudNativePG or
 * Patroni moves to the promoted node.
 *
 * Under 5 submits/s of test.sleep: the primary is stopped in immediate mode (a node lost),
 * the address leads nowhere for 5 s (the failure detection), the replica is promoted and the
 * address switched to it. Then: every accepted (202) execution is
 * in the new primary and ends, once, charged once, the ledger audit passes, only
 * 200/202/503 were answered; every service is ready again by itself (same processes); the
 * LISTEN connections (key changes, execution changes, webhooks) are held again on the new
 * primary, and a key revoked there is refused at once; the outbox drains.
 */
const RATE_PER_SECOND = 5;
/**
 * How long the address leads nowhere before the replica is promoted: the time a manager takes
 * to declare the primary lost (CloudNativePG's instance manager and liveness probes, Patroni's
 * `ttl`), several seconds in production. Longer than the services' 2 s leases, so every lease
 * held at the fault expires and is reclaimed, and the gateway answers 503 meanwhile.
 */
const DETECTION_MS = 5_000;
/**
 * FAULTS_PG_ASYNC=1 runs the pair with asynchronous replication, what a default primary and
 * replica do, to see what a failover loses then (the same checks: a lost acknowledged commit
 * fails them). Not what the deploy runs.
 */
const ASYNCHRONOUS = process.env.FAULTS_PG_ASYNC === '1';
const LISTENERS = ['tes-key-changes', 'tes-execution-changes', 'tes-webhooks'];
let pair: PostgresPair | undefined;
let address: TcpRelay | undefined;
let cluster: Cluster | undefined;
const report: Record<string, unknown> = {};
const started = Date.now();

beforeAll(async () => {
  assertFreshBuild(); // before spending seconds on the private servers
  pair = await PostgresPair.start({ synchronous: !ASYNCHRONOUS });
  report.replication = ASYNCHRONOUS ? 'asynchronous' : 'synchronous';
  address = await startTcpRelay(pair.url('primary'), 5432);
  // the shared RabbitMQ (a queue prefix of the cluster's own): this suite stops only its Postgres
  cluster = await Cluster.start({ databaseServerUrl: address.url, env: { AUTH_CACHE_TTL_MS: '5000' } });
}, 180_000);

afterAll(async () => {
  try {
    await cluster?.shutdown();
  } finally {
    await address?.close();
    await pair?.destroy();
  }
  report.totalSeconds = Math.round((Date.now() - started) / 1000);
  process.stdout.write(`\npostgres failover figures:\n${JSON.stringify(report, null, 2)}\n`);
}, 120_000);

/** A steady stream of paid submits, each resent (same key and body) until it has an answer. */
class Load {
  readonly subs: Submission[] = [];
  private readonly pending: Promise<unknown>[] = [];
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly client: FaultClient,
    private readonly template: Submission,
  ) {}

  start(): void {
    this.timer = setInterval(() => {
      const s: Submission = { ...this.template, key: `${this.template.key}-${this.subs.length}`, attempts: [] };
      this.subs.push(s);
      this.pending.push(this.client.sendUntilAnswered(s, 120_000, 500));
    }, 1_000 / RATE_PER_SECOND);
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await Promise.all(this.pending);
  }
}

/** The LISTEN connections a node holds, by application_name. */
async function listeners(node: Node): Promise<Record<string, number>> {
  const rows = await pair!.sql<{ application_name: string; n: number }>(
    node,
    `SELECT application_name, count(*)::int AS n FROM pg_stat_activity
      WHERE application_name = ANY('{${LISTENERS.join(',')}}') AND query LIKE 'LISTEN %' GROUP BY 1`,
  );
  return Object.fromEntries(LISTENERS.map((l) => [l, rows.find((r) => r.application_name === l)?.n ?? 0]));
}

/** Polls until each listener is held once on `node`; returns how long that took. */
async function waitListening(node: Node, timeoutMs: number): Promise<number> {
  const t = Date.now();
  for (;;) {
    const held = await listeners(node);
    if (LISTENERS.every((l) => held[l] === 1)) return Date.now() - t;
    if (Date.now() - t > timeoutMs) throw new Error(`LISTEN connections on the ${node} after ${timeoutMs} ms: ${JSON.stringify(held)}`);
    await sleep(100);
  }
}

it('the primary is lost under load and the replica promoted: nothing acknowledged lost, nothing doubled, services follow the address', async () => {
  const c = cluster!;
  const client = new FaultClient(c.baseUrl);
  const p = await seedProject(c.db, { creditMicros: 50_000_000 });
  const credits = new Map([[p.projectId, 50_000_000]]);
  const template = await client.prepare(p.secret, p.projectId, `pgfo-${Date.now().toString(36)}`, 'test.sleep', {
    seconds: 0.2,
    steps: 2,
    costMicrosPerStep: 700,
  });
  const before = Object.fromEntries(SERVICES.map((s) => [s, c.process(s)])) as Record<ServiceName, ServiceProcess>;
  // the check is not vacuous: the listeners are seen on the primary first
  await waitListening('primary', 10_000);
  report.replicationBefore = await pair!.replication();

  const load = new Load(client, template);
  load.start();
  // declared out here for the figures; the load stops even when a check fails midway
  const timings: Record<string, number> = {};
  const notReady = Object.fromEntries(SERVICES.map((s) => [s, 0])) as Record<ServiceName, number>;
  let recoveryMs: Record<ServiceName, number> | undefined;
  let relistenMs: number | undefined;
  let waitMs: number | undefined;
  let acceptedBefore: number | undefined;
  const woken: Submission = { ...template, key: `${template.key}-woken`, attempts: [] };
  let watching = true;
  try {
    await sleep(5_000);

    // readiness sampled through the switch, every ≈100 ms
    const watch = (async () => {
      while (watching) {
        const codes = await Promise.all(SERVICES.map((s) => httpStatus(c.readyUrl(s), 500)));
        codes.forEach((code, i) => code !== 200 && notReady[SERVICES[i]!]++);
        await sleep(100);
      }
    })();

    acceptedBefore = load.subs.filter((s) => s.executionId).length;
    const faultStarted = Date.now();
    await pair!.stopImmediate('primary');
    timings.stopImmediate = Date.now() - faultStarted;
    // the operator's detection: nothing answers at the address meanwhile
    await sleep(DETECTION_MS);
    const promoteStarted = Date.now();
    await pair!.promote();
    timings.promote = Date.now() - promoteStarted;
    address!.switchTo(pair!.url('replica'));
    const switched = Date.now();
    timings.primaryLostToAddressSwitched = switched - faultStarted;
    recoveryMs = Object.fromEntries(await Promise.all(SERVICES.map(async (s) => [s, await c.waitReady(s, 60_000)] as const))) as Record<ServiceName, number>;
    relistenMs = await waitListening('replica', 30_000);
    watching = false;
    await watch;

    // a key revoked on the new primary is refused at once: its NOTIFY reaches the gateway
    const keyClient = new FaultClient(c.baseUrl);
    const key = await addKey(c.db, p.projectId);
    const firstId = load.subs.find((s) => s.executionId)!.executionId!;
    const seen = await keyClient.request('GET', `/tools/executions/${firstId}`, key.secret);
    expect('status' in seen && seen.status).toBe(200);
    await revokeApiKey(c.db, key.id);
    await sleep(1_000); // within the 5 s the gateway's cache would otherwise trust the row
    const refused = await keyClient.request('GET', `/tools/executions/${firstId}`, key.secret);
    expect('status' in refused && refused.status).toBe(401);

    // a wait on an execution is woken by its NOTIFY from the new primary, not by the gateway's
    // 15 s re-sync that would cover a listener lost for good
    await client.sendUntilAnswered(woken, 30_000, 500);
    const waitStarted = Date.now();
    const ended = await client.request('GET', `/tools/executions/${woken.executionId}`, p.secret, { headers: { Prefer: 'wait=20' }, timeoutMs: 30_000 });
    waitMs = Date.now() - waitStarted;
    expect('status' in ended && [ended.status, ended.body.data.status]).toEqual([200, 'succeeded']);
    expect(waitMs).toBeLessThan(8_000); // its two 0.2 s steps, a loaded machine; the re-sync is 15 s
    await sleep(5_000); // load on the new primary
  } finally {
    watching = false;
    await load.stop();
  }

  // executions the client was told about (202) that the new primary does not have
  const accepted = load.subs.filter((s) => s.executionId);
  const present = new Set(
    (
      await c
        .db('executions')
        .select('id')
        .whereIn(
          'id',
          accepted.map((s) => s.executionId!),
        )
    ).map((r: { id: string }) => r.id),
  );
  const lost = accepted.filter((s) => !present.has(s.executionId!));
  expect(lost.map((s) => s.key)).toEqual([]);

  const drainMs = await waitForEnd(c.db, [...load.subs, woken], false, 180_000);
  const { problems, figures } = await checkInvariants(c.db, client, [...load.subs, woken], {
    credits,
    allowedStatuses: [200, 202, 503],
    forbidErrorCodes: ['delivery_limit_exceeded'],
  });
  const outboxUnsent = Number((await c.db('outbox').whereNull('published_at').count<{ n: string }[]>({ n: '*' }))[0]!.n);
  const ids = accepted.map((s) => s.executionId!);
  const reclaimed = Number((await c.db('executions').whereIn('id', ids).andWhere('claims', '>', 1).count<{ n: string }[]>({ n: '*' }))[0]!.n);
  const stepsRerun = Number((await c.db('execution_steps').whereIn('execution_id', ids).andWhere('attempts', '>', 1).count<{ n: string }[]>({ n: '*' }))[0]!.n);
  const attempts = load.subs.flatMap((s) => s.attempts);
  const count = (service: ServiceName, event: string) => c.lines(service).filter((l) => l.includes(`"${event}"`)).length;
  Object.assign(report, {
    timingsMs: timings,
    acceptedBeforeFault: acceptedBefore,
    requestsSent: attempts.length,
    httpStatuses: client.statusSummary(),
    answered503: attempts.filter((a) => a.status === 503).length,
    lostResponses: attempts.filter((a) => a.lost).length,
    acceptedButMissingAfterFailover: lost.length,
    ...figures,
    recoveryAfterSwitchMs: recoveryMs,
    notReadySamples: notReady,
    relistenAfterSwitchMs: relistenMs,
    waitWokenAfterMs: waitMs,
    executionsClaimedTwice: reclaimed,
    stepsRerun,
    leaseLostLines: count('worker', 'worker.execution.lease_lost'),
    leaseExpiredLines: count('relay', 'relay.lease.expired'),
    outboxUnsentAfterDrain: outboxUnsent,
    drainMs,
  });

  expect(problems).toEqual([]);
  expect(outboxUnsent).toBe(0);
  // the writes went to the promoted node: it is no longer in recovery
  expect((await pair!.sql<{ r: boolean }>('replica', 'SELECT pg_is_in_recovery() AS r'))[0]!.r).toBe(false);
  expect(await listeners('replica')).toEqual(Object.fromEntries(LISTENERS.map((l) => [l, 1])));
  for (const s of SERVICES) {
    expect(notReady[s]).toBeGreaterThan(0); // each service saw the database go...
    expect(c.process(s)).toBe(before[s]); // ...and came back by itself, same process
    expect(before[s].exited).toBeUndefined();
  }
}, 300_000);
