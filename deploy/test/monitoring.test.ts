import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { stringify } from 'yaml';
import { readYaml, REPO } from './kustomize';
import { checkPromQL, metricCatalog, REPLICATED_GAUGES, type MetricInfo, type Selector } from './promql';

/**
 * The Grafana dashboard and the PrometheusRule alerts: every PromQL expression names metrics,
 * labels and functions that exist (read from libs/observability), uses counters and gauges
 * the right way, and the required panels and alerts are there.
 */

type Json = any;
const DASHBOARD = path.join(REPO, 'deploy/grafana/tes-dashboard.json');
const RULES = path.join(REPO, 'deploy/k8s/components/monitoring/prometheus-rules.yaml');
let catalog: Map<string, MetricInfo>;
let dashboard: Json;
/** Gauges only the relay reads (from the database); every other process exports NaN. */
const RELAY_ONLY = ['tes_outbox_lag_seconds', 'tes_reserved_micros_outstanding', 'tes_needs_review_executions', 'tes_ledger_audit_ok'];
let rules: { alert: string; expr: string; for: string; labels: Record<string, string>; annotations: Record<string, string> }[];

beforeAll(() => {
  catalog = metricCatalog();
  dashboard = JSON.parse(readFileSync(DASHBOARD, 'utf8'));
  const [doc] = readYaml(RULES) as Json[];
  expect(doc.kind).toBe('PrometheusRule');
  rules = doc.spec.groups.flatMap((g: Json) => g.rules);
});

test('the metric catalog read from the registry libs/observability builds holds the metrics this deployment relies on', () => {
  const wanted = [
    'tes_http_request_duration_seconds',
    'tes_executions_total',
    'tes_execution_duration_seconds',
    'tes_settlement_duration_seconds',
    'tes_lease_expiries_total',
    'tes_outbox_published_total',
    'tes_outbox_lag_seconds',
    'tes_reserved_micros_outstanding',
    'tes_needs_review_executions',
    'tes_queue_depth',
    'tes_queue_consumers',
    'tes_queued_executions',
    'tes_running_executions',
    'tes_oldest_queued_execution_age_seconds',
    'tes_ledger_audit_ok',
    'tes_settled_micros_total',
    'tes_execution_failures_total',
    'tes_http_rejections_total',
    'tes_provider_request_duration_seconds',
    'tes_db_pool_connections',
    'tes_db_pool_pending_acquires',
    'tes_db_pool_max_connections',
    'nodejs_eventloop_lag_seconds',
    'process_cpu_seconds_total',
  ];
  expect(wanted.filter((m) => !catalog.has(m))).toEqual([]);
  // only counters end in _total (promtool check metrics); default metrics carry no tes_ prefix
  expect([...catalog].filter(([name, m]) => name.endsWith('_total') && m.type !== 'counter').map(([name]) => name)).toEqual([]);
  expect([...catalog.keys()].filter((name) => /^tes_(nodejs|process)_/.test(name))).toEqual([]);
  expect(catalog.get('tes_execution_failures_total')?.labels).toEqual(new Set(['tool', 'error_code']));
});

test('the PromQL reader rejects typos, unknown labels and misused counters and gauges', () => {
  const problems = (e: string) => checkPromQL(e, catalog).problems;
  expect(problems('sum by (route) (rate(tes_http_request_duration_seconds_count[5m]))')).toEqual([]);
  expect(problems('max(tes_outbox_lag_second)')).toEqual(['unknown metric tes_outbox_lag_second']);
  expect(problems('sum by (queue) (rate(tes_executions_total[5m]))')).toEqual(['grouping by queue, a label none of the metrics has']);
  expect(problems('tes_executions_total{state="failed"}')[0]).toBe('tes_executions_total has no label state');
  expect(problems('sum(tes_settled_micros_total)')).toEqual(['tes_settled_micros_total is cumulative: use it through rate() or increase()']);
  expect(problems('rate(tes_queue_depth[5m])')).toEqual(['tes_queue_depth is a gauge: rate()/increase() of it is meaningless']);
  expect(problems('sum(tes_reserved_micros_outstanding)')).toEqual([
    'tes_reserved_micros_outstanding is reported by every relay: take max()/min(), never sum()',
  ]);
  expect(problems('histgram_quantile(0.9, rate(tes_settlement_duration_seconds_bucket[5m]))')).toEqual(['unknown function histgram_quantile()']);
});

describe('Grafana dashboard', () => {
  const panels = (): Json[] => dashboard.panels;
  const exprs = (): { panel: Json; expr: string }[] => panels().flatMap((p) => p.targets.map((t: Json) => ({ panel: p, expr: t.expr })));

  test('has a Prometheus datasource variable, used by every panel and query', () => {
    const vars: Json[] = dashboard.templating.list;
    const ds = vars.find((v) => v.type === 'datasource');
    expect(ds).toMatchObject({ name: 'datasource', query: 'prometheus' });
    const ref = { type: 'prometheus', uid: `\${${ds.name}}` };
    for (const p of panels()) {
      expect([p.title, p.datasource]).toEqual([p.title, ref]);
      for (const t of p.targets) expect([p.title, t.datasource]).toEqual([p.title, ref]);
    }
    for (const v of vars.filter((x) => x.type === 'query')) expect(v.datasource).toEqual(ref);
    expect(typeof dashboard.uid).toBe('string');
  });

  test('panel ids are unique and panels do not overlap on the 24-column grid', () => {
    const ids = panels().map((p) => p.id);
    expect(ids.every((id) => Number.isInteger(id) && id > 0)).toBe(true);
    expect(new Set(ids).size).toBe(ids.length);
    const cells = new Map<string, string>();
    for (const p of panels()) {
      const { x, y, w, h } = p.gridPos;
      expect(x + w).toBeLessThanOrEqual(24);
      for (let i = x; i < x + w; i++) {
        for (let j = y; j < y + h; j++) {
          const other = cells.get(`${i},${j}`);
          expect([p.title, other]).toEqual([p.title, undefined]);
          cells.set(`${i},${j}`, p.title);
        }
      }
    }
  });

  test('every query names existing metrics and labels and filters on the namespace variable', () => {
    const problems: string[] = [];
    for (const { panel, expr } of exprs()) {
      const r = checkPromQL(expr, catalog);
      problems.push(...r.problems.map((p) => `${panel.title}: ${p}`));
      for (const s of r.selectors)
        if (s.matchers.get('namespace') !== '=~$namespace') problems.push(`${panel.title}: ${s.series} is not filtered by namespace`);
    }
    for (const v of dashboard.templating.list.filter((x: Json) => x.type === 'query')) {
      const m = /^label_values\((\w+),\s*(\w+)\)$/.exec(v.definition);
      expect(m && catalog.has(m[1]!)).toBeTruthy();
    }
    for (const p of panels()) expect(new Set(p.targets.map((t: Json) => t.refId)).size).toBe(p.targets.length);
    expect(problems).toEqual([]);
  });

  test('every query parses as PromQL (promtool check rules, each query a recording rule)', () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'tes-dashboard-'));
    try {
      const rules = exprs().map(({ expr }, i) => ({
        record: `tes:dashboard_query_${i}`,
        expr: expr.replaceAll('$__rate_interval', '5m').replaceAll('$namespace', '.*'),
      }));
      writeFileSync(path.join(dir, 'queries.yaml'), stringify({ groups: [{ name: 'dashboard', rules }] }));
      const r = spawnSync('promtool', ['check', 'rules', 'queries.yaml'], { cwd: dir, encoding: 'utf8' });
      if (r.error) throw new Error(`promtool is not installed (apt-get install prometheus): ${r.error.message}`);
      expect(`${r.stdout}${r.stderr}`).toContain(`SUCCESS: ${rules.length} rules found`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('a gauge every relay exports is reduced per namespace first: several namespaces selected give one line each, or their sum', () => {
    const vars: Json[] = dashboard.templating.list;
    expect(vars.find((v) => v.name === 'namespace')).toMatchObject({ multi: true, includeAll: true });
    const problems: string[] = [];
    for (const { panel, expr } of exprs()) {
      for (const g of REPLICATED_GAUGES) {
        if (!new RegExp(`\\b${g}\\b`).test(expr)) continue;
        const perNamespace = new RegExp(`(max|min) by \\(([^)]*\\b)?namespace\\b[^)]*\\) \\(${g}\\b`).test(expr);
        // a stat may show the worst namespace (lag, audit) as max()/min() over them all
        const worstOf = panel.type === 'stat' && new RegExp(`^(max|min)\\(${g}\\{`).test(expr);
        if (!perNamespace && !worstOf) problems.push(`${panel.title}: ${expr}`);
      }
    }
    expect(problems).toEqual([]);
    // only the relay reads them; the gateways and workers export NaN (older versions 0)
    for (const { panel, expr } of exprs()) {
      for (const s of checkPromQL(expr, catalog).selectors.filter((x) => RELAY_ONLY.includes(x.metric)))
        expect([panel.title, s.series, s.matchers.get('service')]).toEqual([panel.title, s.series, '=relay']);
    }
    // amounts and counts add up across namespaces; the worst-of form is only for lag and the audit
    for (const g of ['tes_reserved_micros_outstanding', 'tes_needs_review_executions']) {
      for (const { panel, expr } of exprs().filter((x) => x.expr.includes(g))) {
        expect([panel.title, expr]).toEqual([
          panel.title,
          panel.type === 'stat' ? expect.stringMatching(/^sum\(max by \(namespace\) \(/) : expect.stringMatching(/^max by \(namespace\) \(/),
        ]);
      }
    }
  });

  test('with two namespaces of two relays each, money reserved and needs_review add up per namespace (promtool test rules)', () => {
    const money = exprs().filter(({ expr }) => /tes_reserved_micros_outstanding|tes_needs_review_executions/.test(expr));
    expect(money.length).toBe(4);
    const dir = mkdtempSync(path.join(os.tmpdir(), 'tes-dashboard-ns-'));
    try {
      writeFileSync(path.join(dir, 'empty.yaml'), stringify({ groups: [] }));
      // every relay of a namespace reports the same value (read from that namespace's database)
      const input_series = [
        ['a', 'relay-1', 5_000_000, 2],
        ['a', 'relay-2', 5_000_000, 2],
        ['b', 'relay-1', 3_000_000, 1],
        ['b', 'relay-2', 3_000_000, 1],
        ['c', 'relay-1', 9_000_000, 7], // not selected
      ].flatMap(([ns, pod, micros, review]) => [
        { series: `tes_reserved_micros_outstanding{namespace="${ns}",pod="${pod}",service="relay"}`, values: `${micros}x5` },
        { series: `tes_needs_review_executions{namespace="${ns}",pod="${pod}",service="relay"}`, values: `${review}x5` },
        // a gateway beside them: NaN, or 0 from a version before issue #27; neither counts
        {
          series: `tes_reserved_micros_outstanding{namespace="${ns}",pod="gateway-${pod}",service="gateway"}`,
          values: pod === 'relay-1' ? 'NaN NaN NaN NaN NaN NaN' : '0x5',
        },
        {
          series: `tes_needs_review_executions{namespace="${ns}",pod="gateway-${pod}",service="gateway"}`,
          values: pod === 'relay-1' ? 'NaN NaN NaN NaN NaN NaN' : '0x5',
        },
      ]);
      const expected = (panel: Json, expr: string) => {
        const reserved = expr.includes('tes_reserved_micros_outstanding');
        const [a, b] = reserved ? [5, 3] : [2, 1];
        return panel.type === 'stat'
          ? [{ labels: '{}', value: a + b }]
          : [
              { labels: '{namespace="a"}', value: a },
              { labels: '{namespace="b"}', value: b },
            ];
      };
      const tests = [
        {
          interval: '1m',
          input_series,
          promql_expr_test: money.map(({ panel, expr }) => ({
            // Grafana writes a multi-value selection into =~ as (a|b)
            expr: expr.replaceAll('$namespace', '(a|b)'),
            eval_time: '2m',
            exp_samples: expected(panel, expr),
          })),
        },
      ];
      writeFileSync(path.join(dir, 'test.yaml'), stringify({ rule_files: ['empty.yaml'], evaluation_interval: '1m', tests }));
      const r = spawnSync('promtool', ['test', 'rules', 'test.yaml'], { cwd: dir, encoding: 'utf8' });
      if (r.error) throw new Error(`promtool is not installed (apt-get install prometheus): ${r.error.message}`);
      expect([r.status, `${r.stdout}${r.stderr}`]).toEqual([0, expect.stringContaining('SUCCESS')]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('shows throughput, latency, refusals by reason, queue depth, outbox lag, money, failures by code, providers, the database pools, Node', () => {
    const all: Selector[] = exprs().flatMap(({ expr }) => checkPromQL(expr, catalog).selectors);
    const series = new Set(all.map((s) => s.series));
    for (const s of [
      'tes_http_request_duration_seconds_count',
      'tes_http_request_duration_seconds_bucket',
      'tes_queue_depth',
      'tes_outbox_lag_seconds',
      'tes_reserved_micros_outstanding',
      'tes_settled_micros_total',
      'tes_execution_failures_total',
      'tes_executions_total',
      'tes_http_rejections_total',
      'tes_provider_request_duration_seconds_bucket',
      'tes_provider_request_duration_seconds_count',
      'tes_db_pool_connections',
      'tes_db_pool_max_connections',
      'tes_db_pool_pending_acquires',
      'tes_webhook_attempts_total',
      'tes_webhook_delivery_lag_seconds_bucket',
      'nodejs_eventloop_lag_p99_seconds',
    ])
      expect([s, series.has(s)]).toEqual([s, true]);
    expect(exprs().some(({ expr }) => expr.includes('by (error_code)') && expr.includes('tes_execution_failures_total'))).toBe(true);
    expect(exprs().some(({ expr }) => expr.includes('by (reason)') && expr.includes('tes_http_rejections_total'))).toBe(true);
    expect(exprs().some(({ expr }) => expr.includes('provider') && expr.includes('outcome!="ok"'))).toBe(true);
    expect(exprs().some(({ expr }) => expr.includes('by (outcome)') && expr.includes('tes_webhook_attempts_total'))).toBe(true);
  });
});

describe('PrometheusRule alerts', () => {
  test('every rule is valid PromQL with a severity, a duration, a summary and a description', () => {
    const problems: string[] = [];
    const names = rules.map((r) => r.alert);
    expect(new Set(names).size).toBe(names.length);
    for (const r of rules) {
      problems.push(...checkPromQL(r.expr, catalog).problems.map((p) => `${r.alert}: ${p}`));
      if (!/^\d+[smh]$/.test(r.for)) problems.push(`${r.alert}: for "${r.for}"`);
      if (!['warning', 'critical'].includes(r.labels?.severity ?? '')) problems.push(`${r.alert}: severity ${r.labels?.severity}`);
      if (!r.annotations?.summary || !r.annotations?.description) problems.push(`${r.alert}: summary and description required`);
    }
    expect(problems).toEqual([]);
  });

  test('alerts on outbox lag, queue depth growth, needs_review > 0, audit failure, the error ratio and the kill switch', () => {
    const has = (re: RegExp) => rules.some((r) => re.test(r.expr.replace(/\s+/g, ' ')));
    expect(has(/max by \(namespace\) \(tes_outbox_lag_seconds\{service="relay"\}\) > \d+/)).toBe(true);
    expect(has(/(delta|deriv|predict_linear)\(tes_queue_depth\[/)).toBe(true);
    expect(has(/tes_needs_review_executions\{service="relay"\}\) > 0/)).toBe(true);
    expect(has(/min by \(namespace\) \(tes_ledger_audit_ok\{service="relay"\}\) == 0/)).toBe(true);
    expect(has(/status=~"5\.\."/)).toBe(true);
    expect(has(/tes_http_rejections_total\{reason="execution_disabled"\}/)).toBe(true);
  });

  test('alerts on a service not scraped (per namespace, and absent() everywhere), page at once, and on failing or late webhooks', () => {
    const rule = (name: string) => rules.find((r) => r.alert === name);
    const absent = rule('TesServiceAbsent');
    expect(absent?.expr.replace(/\s+/g, ' ')).toMatch(/unless on \(namespace, service\) group by \(namespace, service\) \(tes_db_pool_max_connections\)/);
    expect(absent).toMatchObject({ labels: { severity: 'critical' } });
    expect(Number.parseInt(absent!.for, 10)).toBeLessThanOrEqual(5);
    for (const service of ['gateway', 'worker', 'relay']) {
      expect(absent?.expr).toContain(`"service", "${service}"`);
      expect(rule('TesDeploymentAbsent')?.expr).toContain(`absent(tes_db_pool_max_connections{service="${service}"})`);
    }
    expect(rule('TesWebhookDeliveryFailing')?.expr).toContain('tes_webhook_attempts_total{outcome!="delivered"}');
    expect(rule('TesWebhookDeliveryLagHigh')?.expr).toContain('tes_webhook_delivery_lag_seconds_bucket');
    // every rule on a gauge only the relay reads selects the relay's series
    for (const r of rules) {
      for (const s of checkPromQL(r.expr, catalog).selectors.filter((x) => RELAY_ONLY.includes(x.metric)))
        expect([r.alert, s.series, s.matchers.get('service')]).toEqual([r.alert, s.series, '=relay']);
    }
  });
});
