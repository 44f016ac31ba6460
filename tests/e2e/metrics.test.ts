import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { bearer, startStack, waitForExecution, type TestStack } from '../stack';

/** Each service's /metrics exposes its series, and they move when work flows. */
let stack: TestStack;

beforeAll(async () => {
  stack = await startStack({ env: { STATE_METRICS_INTERVAL_MS: '200', LEDGER_AUDIT_INTERVAL_MS: '300' } });
});

afterAll(async () => {
  await stack?.stop();
});

async function scrape(port: number): Promise<string> {
  const res = await fetch(`http://127.0.0.1:${port}/metrics`);
  expect(res.status).toBe(200);
  return res.text();
}

/** The value of one series, written `name{k="v",…}` with its exact label set in any order. */
function value(text: string, series: string): number | undefined {
  const parse = (s: string) => {
    const m = /^([a-z_]+)(?:\{(.*)\})?$/.exec(s);
    const labels = Object.fromEntries([...(m?.[2] ?? '').matchAll(/([a-z_]+)="([^"]*)"/g)].map((x) => [x[1], x[2]]));
    return { name: m?.[1], labels: JSON.stringify(Object.entries(labels).sort()) };
  };
  const want = parse(series);
  for (const line of text.split('\n')) {
    if (line.startsWith('#') || !line) continue;
    const at = line.lastIndexOf(' ');
    const got = parse(line.slice(0, at));
    if (got.name === want.name && got.labels === want.labels) return Number(line.slice(at + 1));
  }
  return undefined;
}

it('gateway, worker and relay expose their series, which move when an execution runs', async () => {
  const ports = { gateway: stack.gatewayMetricsPort, worker: stack.worker!.metricsPort, relay: stack.relay!.metricsPort };
  const release = (JSON.parse(readFileSync(path.join(__dirname, '../../lerna.json'), 'utf8')) as { version: string }).version;
  for (const port of Object.values(ports)) {
    const health = await fetch(`http://127.0.0.1:${port}/healthz`);
    expect(health.status).toBe(200);
    // the release each process runs (issue #27): lerna's one version, in /healthz and tes_build_info
    expect(await health.json()).toEqual({ status: 'ok', version: release });
    expect(await scrape(port)).toContain(`tes_build_info{version="${release}",nodejs="${process.versions.node}"`);
    expect((await fetch(`http://127.0.0.1:${port}/readyz`)).status).toBe(200);
  }
  const before = { worker: await scrape(ports.worker) };
  const p = await stack.seed({ creditMicros: 10_000 });
  const v = (await stack.http().get('/tools').set(bearer(p.secret))).body.data.priceVersion;
  const sub = await stack
    .http()
    .post('/tools/test.sleep')
    .set({ ...bearer(p.secret), 'Idempotency-Key': 'metrics-run-1' })
    .send({ tool: 'test.sleep', arguments: { seconds: 0, steps: 2, costMicrosPerStep: 300 }, priceVersion: v, maximumChargeMicros: 600 });
  expect(sub.status).toBe(202);
  await waitForExecution(stack, p.secret, sub.body.data.id);
  const failing = await stack
    .http()
    .post('/tools/test.sleep')
    .set({ ...bearer(p.secret), 'Idempotency-Key': 'metrics-run-2' })
    .send({ tool: 'test.sleep', arguments: { seconds: 0, steps: 2, costMicrosPerStep: 1, failAtStep: 1 }, priceVersion: v, maximumChargeMicros: 2 });
  await waitForExecution(stack, p.secret, failing.body.data.id);

  const gw = await scrape(ports.gateway);
  expect(value(gw, 'tes_http_request_duration_seconds_count{method="POST",route="/tools/{tool}",status="202",service="gateway"}')).toBe(2);
  expect(value(gw, 'tes_executions_total{tool="test.sleep",status="queued",service="gateway"}')).toBe(2);
  expect(value(gw, 'tes_outbox_published_total{source="gateway",service="gateway"}')).toBe(2);
  // never an id as a label
  expect(gw).not.toMatch(/exe_[0-9A-Z]{26}|prj_[0-9A-Z]{26}/);

  const wk = await scrape(ports.worker);
  expect(value(before.worker, 'tes_executions_total{tool="test.sleep",status="succeeded",service="worker"}')).toBeUndefined();
  expect(value(wk, 'tes_executions_total{tool="test.sleep",status="succeeded",service="worker"}')).toBe(1);
  expect(value(wk, 'tes_settled_micros_total{tool="test.sleep",service="worker"}')).toBe(601);
  expect(value(wk, 'tes_execution_failures_total{tool="test.sleep",error_code="provider_error",service="worker"}')).toBe(1);
  expect(value(wk, 'tes_settlement_duration_seconds_count{outcome="succeeded",service="worker"}')).toBe(1);

  // the relay's state gauges follow the database and the broker
  await new Promise((r) => setTimeout(r, 500));
  const rl = await scrape(ports.relay);
  const queue = `${stack.config.amqpPrefix}executions.test`;
  expect(value(rl, `tes_queue_depth{queue="${queue}",service="relay"}`)).toBe(0);
  expect(value(rl, `tes_queue_consumers{queue="${queue}",service="relay"}`)).toBe(1);
  expect(value(rl, 'tes_reserved_micros_outstanding{service="relay"}')).toBe(0);
  expect(value(rl, 'tes_needs_review_executions{service="relay"}')).toBe(0);
  expect(value(rl, 'tes_ledger_audit_ok{service="relay"}')).toBe(1);
  expect(value(rl, 'tes_outbox_lag_seconds{service="relay"}')).toBe(0);
});

it('the audit gauge turns 0 when an invariant breaks', async () => {
  const p = await stack.seed({ creditMicros: 1_000 });
  await stack.db('projects').where({ id: p.projectId }).increment('available_micros', 1);
  try {
    await new Promise((r) => setTimeout(r, 800));
    expect(value(await scrape(stack.relay!.metricsPort), 'tes_ledger_audit_ok{service="relay"}')).toBe(0);
  } finally {
    await stack.db('projects').where({ id: p.projectId }).decrement('available_micros', 1);
  }
});

it('a 429 is counted by its reason, and every reason is exported from the start', async () => {
  const p = await stack.seed({ creditMicros: 100 });
  const v = (await stack.http().get('/tools').set(bearer(p.secret))).body.data.priceVersion;
  const before = await scrape(stack.gatewayMetricsPort);
  expect(value(before, 'tes_http_rejections_total{reason="execution_disabled",service="gateway"}')).toBe(0);
  const refused = await stack
    .http()
    .post('/tools/test.sleep')
    .set({ ...bearer(p.secret), 'Idempotency-Key': 'metrics-broke-1' })
    .send({ tool: 'test.sleep', arguments: { seconds: 0, steps: 2, costMicrosPerStep: 300 }, priceVersion: v, maximumChargeMicros: 600 });
  expect([refused.status, refused.body.error?.message]).toEqual([429, 'insufficient_balance']);
  const after = await scrape(stack.gatewayMetricsPort);
  const was = value(before, 'tes_http_rejections_total{reason="insufficient_balance",service="gateway"}')!;
  expect(value(after, 'tes_http_rejections_total{reason="insufficient_balance",service="gateway"}')).toBe(was + 1);
  expect(value(after, 'tes_http_rejections_total{reason="monthly_cap_exceeded",service="gateway"}')).toBe(0);
});

it('every scrape passes promtool check metrics: default metrics unprefixed, only counters end in _total, the pool gauges there', async () => {
  const ports = { gateway: stack.gatewayMetricsPort, worker: stack.worker!.metricsPort, relay: stack.relay!.metricsPort };
  for (const [service, port] of Object.entries(ports)) {
    const text = await scrape(port);
    const lint = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' });
    expect([service, lint.error, lint.status, `${lint.stdout}${lint.stderr}`.trim()]).toEqual([service, undefined, 0, '']);
    expect(text).toMatch(/^nodejs_eventloop_lag_seconds\{/m);
    expect(text).toMatch(/^process_cpu_seconds_total\{/m);
    expect(text).not.toMatch(/^tes_(nodejs|process)_/m);
    // each process's knex pool, collected as it is scraped: the pool's maximum is its DB_POOL_MAX (the relay's at most 4)
    expect(value(text, `tes_db_pool_max_connections{service="${service}"}`)).toBe(service === 'relay' ? 4 : stack.config.dbPoolMax);
    expect(value(text, `tes_db_pool_connections{state="in_use",service="${service}"}`)).toBeGreaterThanOrEqual(0);
    expect(value(text, `tes_db_pool_pending_acquires{service="${service}"}`)).toBe(0);
    // only the relay audits: elsewhere the verdict is NaN, never a 0 that min() would page on
    if (service !== 'relay') expect(value(text, `tes_ledger_audit_ok{service="${service}"}`)).toBeNaN();
    // so are the gauges only the relay reads from the database: a 0 from the gateways and the
    // workers would be max()'s answer with every relay down, and the outbox lag alert silent
    for (const gauge of ['tes_outbox_lag_seconds', 'tes_needs_review_executions', 'tes_reserved_micros_outstanding'])
      if (service !== 'relay') expect([gauge, value(text, `${gauge}{service="${service}"}`)]).toEqual([gauge, NaN]);
  }
});

it("the LISTEN connections each process holds are the ones deploy/README.md's connection budget counts", async () => {
  // a LISTEN needs a connection of its own, outside the pool: the gateway has one for key
  // revocations and one for execution changes, the relay one for webhook deliveries
  const { rows } = await stack.db.raw<{ rows: { application_name: string; n: number }[] }>(
    `SELECT application_name, count(*)::int AS n FROM pg_stat_activity
      WHERE datname = current_database() AND query ILIKE 'LISTEN %' GROUP BY application_name`,
  );
  const held = Object.fromEntries(rows.map((r) => [r.application_name, r.n]));
  expect(held).toEqual({ 'tes-key-changes': 1, 'tes-execution-changes': 1, 'tes-webhooks': 1 });
  // the budget table: | process | pool | LISTEN connections (their application_name) |
  const readme = readFileSync(path.join(__dirname, '../../deploy/README.md'), 'utf8');
  const listens = (process: string) => {
    const row = new RegExp(`^\\s*\\| ${process} \\|[^|]*\\| (\\d+)([^|]*)\\|`, 'm').exec(readme);
    return row ? { count: Number(row[1]), names: [...row[2]!.matchAll(/`(tes-[a-z-]+)`/g)].map((m) => m[1]).sort() } : undefined;
  };
  expect(listens('gateway')).toEqual({ count: 2, names: ['tes-execution-changes', 'tes-key-changes'] });
  expect(listens('worker')).toEqual({ count: 0, names: [] });
  expect(listens('relay')).toEqual({ count: 1, names: ['tes-webhooks'] });
});
