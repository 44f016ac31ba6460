import { createMetrics } from '@tes/observability';

/**
 * The metrics our processes export, read from the registry libs/observability builds, and a PromQL
 * reader that finds every metric, label and function an expression names, so dashboards and
 * alerts cannot refer to a metric or label that does not exist (a typo there is a silent,
 * empty panel or an alert that never fires).
 */

export interface MetricInfo {
  type: 'counter' | 'gauge' | 'histogram';
  labels: Set<string>;
}

/** Labels every series has: the registry default (service) and what Prometheus attaches. */
const INFRA_LABELS = new Set(['service', 'job', 'instance', 'namespace', 'pod', 'container', 'endpoint']);

export function metricCatalog(): Map<string, MetricInfo> {
  // the registry a process builds, default metrics included: what a scrape shows, by type and labels
  const out = new Map<string, MetricInfo>();
  for (const m of createMetrics('catalog').registry.getMetricsAsArray()) {
    const metric = m as unknown as { name: string; type: string; labelNames?: string[] };
    if (metric.type !== 'counter' && metric.type !== 'gauge' && metric.type !== 'histogram') continue;
    out.set(metric.name, { type: metric.type, labels: new Set(metric.labelNames ?? []) });
  }
  return out;
}

const FUNCTIONS = new Set([
  'sum',
  'group',
  'min',
  'max',
  'avg',
  'count',
  'topk',
  'bottomk',
  'quantile',
  'stddev',
  'rate',
  'irate',
  'increase',
  'delta',
  'idelta',
  'deriv',
  'predict_linear',
  'histogram_quantile',
  'abs',
  'clamp_min',
  'clamp_max',
  'absent',
  'absent_over_time',
  'label_replace',
  'vector',
  'scalar',
  'time',
  'sum_over_time',
  'avg_over_time',
  'max_over_time',
  'min_over_time',
  'changes',
  'resets',
  'round',
  'ceil',
  'floor',
]);
const KEYWORDS = new Set(['and', 'or', 'unless', 'bool', 'offset', 'inf', 'nan']);
/** Gauges every relay replica exports with the same value: summing them double-counts. */
export const REPLICATED_GAUGES = new Set([
  'tes_outbox_lag_seconds',
  'tes_queue_depth',
  'tes_queue_consumers',
  'tes_reserved_micros_outstanding',
  'tes_needs_review_executions',
  'tes_ledger_audit_ok',
  'tes_queued_executions',
  'tes_running_executions',
  'tes_oldest_queued_execution_age_seconds',
]);

export interface Selector {
  series: string;
  metric: string;
  matchers: Map<string, string>;
}

/** The metric a series name belongs to (histograms export _bucket, _sum and _count). */
function metricOf(series: string, catalog: Map<string, MetricInfo>): string | undefined {
  if (catalog.has(series)) return series;
  const base = series.replace(/_(bucket|sum|count)$/, '');
  return catalog.get(base)?.type === 'histogram' ? base : undefined;
}

/** Reads an expression; returns its selectors and every problem found. */
export function checkPromQL(expr: string, catalog: Map<string, MetricInfo>): { selectors: Selector[]; problems: string[] } {
  const problems: string[] = [];
  const selectors: Selector[] = [];
  // string contents first ("5..", "$namespace"), keeping the quotes for the matchers
  const values: string[] = [];
  let e = expr.replace(/"((?:[^"\\]|\\.)*)"/g, (_m, v: string) => `"${values.push(v) - 1}"`);
  e = e.replace(/([a-zA-Z_:][a-zA-Z0-9_:]*)?\s*\{([^}]*)\}/g, (_m, series: string | undefined, body: string) => {
    if (!series) {
      problems.push(`a selector without a metric name: {${body}}`);
      return ' ';
    }
    const matchers = new Map<string, string>();
    for (const mm of body.matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"(\d+)"/g)) matchers.set(mm[1]!, `${mm[2]}${values[Number(mm[3])]}`);
    selectors.push({ series, metric: metricOf(series, catalog) ?? series, matchers });
    return ` ${series} `;
  });
  const grouping: string[] = [];
  e = e.replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)/g, (_m, _k, labels: string) => {
    grouping.push(
      ...labels
        .split(',')
        .map((l) => l.trim())
        .filter(Boolean),
    );
    return ' ';
  });
  e = e.replace(/\[[^\]]*\]/g, ' ');
  const tokens = [...e.matchAll(/(\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)|([a-zA-Z_:][a-zA-Z0-9_:]*)(\s*\()?|("\d+")|(\S)/g)];
  for (const t of tokens) {
    const ident = t[2];
    if (!ident) continue;
    if (t[3] && !KEYWORDS.has(ident.toLowerCase())) {
      if (!FUNCTIONS.has(ident)) problems.push(`unknown function ${ident}()`);
    } else if (!KEYWORDS.has(ident.toLowerCase()) && !selectors.some((s) => s.series === ident)) {
      selectors.push({ series: ident, metric: metricOf(ident, catalog) ?? ident, matchers: new Map() });
    }
  }
  const known = new Set<string>(INFRA_LABELS);
  for (const s of selectors) {
    const info = catalog.get(s.metric);
    if (!info) {
      problems.push(`unknown metric ${s.series}`);
      continue;
    }
    for (const l of info.labels) known.add(l);
    if (info.type === 'histogram') known.add('le');
    for (const label of s.matchers.keys()) {
      if (!info.labels.has(label) && !INFRA_LABELS.has(label)) problems.push(`${s.series} has no label ${label}`);
    }
  }
  for (const l of grouping) if (!known.has(l)) problems.push(`grouping by ${l}, a label none of the metrics has`);
  if (selectors.length === 0) problems.push('no metric in the expression');
  problems.push(...misuse(expr, selectors, catalog));
  return { selectors, problems };
}

/** Counters only through rate()/increase(); gauges never through them; replicated gauges never summed. */
function misuse(expr: string, selectors: Selector[], catalog: Map<string, MetricInfo>): string[] {
  const problems: string[] = [];
  for (const s of selectors) {
    const info = catalog.get(s.metric);
    if (!info) continue;
    for (const m of expr.matchAll(new RegExp(`\\b${s.series}\\b(?![_a-z])`, 'g'))) {
      const before = expr.slice(0, m.index).replace(/\s+/g, '');
      const inRate = /(rate|increase)\($/.test(before);
      const cumulative = info.type === 'counter' || (info.type === 'histogram' && s.series !== s.metric);
      if (cumulative && !inRate) problems.push(`${s.series} is cumulative: use it through rate() or increase()`);
      if (info.type === 'gauge' && inRate) problems.push(`${s.series} is a gauge: rate()/increase() of it is meaningless`);
      if (REPLICATED_GAUGES.has(s.metric) && /sum(by\([^)]*\))?\((\w+\()*$/.test(before))
        problems.push(`${s.series} is reported by every relay: take max()/min(), never sum()`);
    }
  }
  return problems;
}
