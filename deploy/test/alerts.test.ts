import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { stringify } from 'yaml';
import { readYaml, REPO } from './kustomize';

/**
 * The PrometheusRule as Prometheus itself reads it: `promtool check rules` on its spec, and
 * `promtool test rules` on deploy/test/alerts.test.yaml (the misfires of issue #17 as series,
 * and every alert firing once). Then what promtool cannot see: every alert keeps the
 * namespace, links a runbook section that exists, and every execution error code is
 * classified as the caller's or ours. promtool comes from Debian's `prometheus` package
 * (.ci/run installs it); without it these tests fail, they are never skipped.
 */

type Json = any;
const RULES = path.join(REPO, 'deploy/k8s/components/monitoring/prometheus-rules.yaml');
const UNIT_TESTS = path.join(REPO, 'deploy/test/alerts.test.yaml');
const RUNBOOK = path.join(REPO, 'deploy/README.md');
/** Where runbook_url points: deploy/README.md in the repository the manifests are applied from. */
const RUNBOOK_BASE = 'https://github.com/tes-platform/tool-execution-service/blob/main/deploy/README.md';

const [ruleDoc] = readYaml(RULES) as Json[];
const rules: { alert: string; expr: string; annotations: Record<string, string> }[] = ruleDoc.spec.groups.flatMap((g: Json) => g.rules);
let dir: string;

beforeAll(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'tes-alerts-'));
  writeFileSync(path.join(dir, 'rules.yaml'), stringify(ruleDoc.spec));
  writeFileSync(path.join(dir, 'alerts.test.yaml'), readFileSync(UNIT_TESTS, 'utf8'));
});

afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

function promtool(...args: string[]): { ok: boolean; output: string } {
  const r = spawnSync('promtool', args, { cwd: dir, encoding: 'utf8' });
  if (r.error) throw new Error(`promtool is not installed (apt-get install prometheus): ${r.error.message}`);
  return { ok: r.status === 0, output: `${r.stdout}${r.stderr}` };
}

test('promtool check rules accepts the PrometheusRule spec', () => {
  const r = promtool('check', 'rules', 'rules.yaml');
  expect(r).toEqual({ ok: true, output: expect.stringContaining(`SUCCESS: ${rules.length} rules found`) });
});

test('promtool test rules: the misfires stay quiet, every alert fires where it should', () => {
  const r = promtool('test', 'rules', 'alerts.test.yaml');
  expect(r.output).toContain('SUCCESS');
  expect(r.ok).toBe(true);
});

test('the unit tests make every alert fire at least once', () => {
  const [doc] = readYaml(UNIT_TESTS) as Json[];
  const fired = new Set<string>(
    doc.tests.flatMap((t: Json) => t.alert_rule_test.filter((a: Json) => (a.exp_alerts ?? []).length > 0).map((a: Json) => a.alertname)),
  );
  expect(rules.map((r) => r.alert).filter((a) => !fired.has(a))).toEqual([]);
});

test('every aggregation keeps the namespace', () => {
  const problems: string[] = [];
  for (const r of rules) {
    const expr = r.expr.replace(/\s+/g, ' ');
    for (const m of expr.matchAll(/\b(sum|min|max|avg|count|group|topk|bottomk|quantile)\s*(by\s*\(([^)]*)\))?\s*\(/g)) {
      const labels = (m[3] ?? '').split(',').map((l) => l.trim());
      if (!labels.includes('namespace')) problems.push(`${r.alert}: ${m[0]}`);
    }
    if (/\b(without|ignoring)\b/.test(expr)) problems.push(`${r.alert}: without/ignoring may drop the namespace`);
  }
  expect(problems).toEqual([]);
});

test("every alert's runbook_url is a section of deploy/README.md's runbook that says what to look at and what to do", () => {
  const readme = readFileSync(RUNBOOK, 'utf8');
  const runbook = readme.slice(readme.indexOf('\n## Runbook'));
  expect(runbook.length).toBeGreaterThan(20);
  const problems: string[] = [];
  for (const r of rules) {
    if (r.annotations.runbook_url !== `${RUNBOOK_BASE}#${r.alert.toLowerCase()}`) problems.push(`${r.alert}: runbook_url ${r.annotations.runbook_url}`);
    const at = runbook.indexOf(`\n### ${r.alert}\n`);
    if (at < 0) {
      problems.push(`${r.alert}: no "### ${r.alert}" section under "## Runbook"`);
      continue;
    }
    const section = runbook.slice(at + 1).split(/\n##+ /)[0]!;
    if (!section.includes('**Look at**') || !section.includes('**Do**')) problems.push(`${r.alert}: its section needs **Look at** and **Do**`);
  }
  expect(problems).toEqual([]);
});

/**
 * Execution error codes a caller causes with its input. Every ExecutionErrorCode is either one
 * of these (left out of TesExecutionFailureRatio) or one of ours (counted): a new code fails
 * this test until it is classified.
 */
const CALLERS = ['invalid_input_file', 'invalid_arguments', 'file_content_mismatch', 'artifact_too_large', 'resource_limit_exceeded'];
const OURS = ['provider_error', 'provider_timeout', 'step_limit_exceeded', 'step_timeout', 'delivery_limit_exceeded', 'tool_unavailable', 'internal_error'];

test("TesExecutionFailureRatio leaves out exactly the caller's error codes, and every execution error code is classified", () => {
  const src = readFileSync(path.join(REPO, 'libs/core/src/errors.ts'), 'utf8');
  const union = /export type ExecutionErrorCode =([^;]*);/.exec(src)?.[1] ?? '';
  const codes = [...union.matchAll(/'([a-z_]+)'/g)].map((m) => m[1]!);
  expect(codes.length).toBeGreaterThan(5);
  expect(codes.filter((c) => !CALLERS.includes(c) && !OURS.includes(c))).toEqual([]);
  const expr = rules.find((r) => r.alert === 'TesExecutionFailureRatio')!.expr;
  const excluded = /error_code!~"([^"]*)"/.exec(expr)?.[1]?.split('|');
  expect(new Set(excluded)).toEqual(new Set(CALLERS));
});
