/**
 * The statements the services really run, captured at node-postgres (so knex's statements and
 * the named prepared ones of `prepared()`, which bypass knex's 'query' event, are both seen),
 * and their plans judged against a seeded history: what tests/e2e/bounded-history.test.ts
 * checks. The captured list is the single owner of "every periodic and per-request
 * statement": a statement added to any code path the test drives is checked without a list
 * to update.
 */
import pg from 'pg';

export interface CapturedStatement {
  text: string;
  values: unknown[];
  /** The application_name of the pool that ran it (tes-gateway, tes-worker, tes-relay, …). */
  app: string;
  /** The prepared statement's name, when it was one. */
  name: string | undefined;
  count: number;
}

interface QueryConfigLike {
  text?: string;
  name?: string;
  values?: unknown[];
}

/** Statements that plan no table access (transaction control, LISTEN, SET, SELECT 1, …). */
const PLANNABLE = /^\s*(WITH|SELECT|INSERT|UPDATE|DELETE)\b/i;

/**
 * Records every plannable statement a client of `database` whose application_name passes
 * `appFilter` sends, deduplicated by SQL text (the first values are kept, they are real).
 * Returns stop(), which restores the client and gives the statements.
 */
export function captureStatements(database: string, appFilter: (app: string) => boolean): { stop(): CapturedStatement[] } {
  const proto = pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown };
  const original = proto.query;
  const seen = new Map<string, CapturedStatement>();
  proto.query = function (this: { connectionParameters?: { database?: string; application_name?: string } }, ...args: unknown[]) {
    const params = this.connectionParameters;
    const app = params?.application_name ?? '';
    if (params?.database === database && appFilter(app)) {
      const [first, second] = args;
      const config: QueryConfigLike =
        typeof first === 'string' ? { text: first, values: Array.isArray(second) ? second : [] } : ((first as QueryConfigLike) ?? {});
      const text = config.text;
      if (typeof text === 'string' && PLANNABLE.test(text)) {
        const known = seen.get(text);
        if (known) known.count += 1;
        else seen.set(text, { text, values: config.values ?? [], app, name: config.name, count: 1 });
      }
    }
    return original.apply(this, args);
  };
  return {
    stop() {
      proto.query = original;
      return [...seen.values()];
    },
  };
}

/** One plan node, as EXPLAIN (FORMAT JSON) gives it. */
interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Name'?: string;
  'Plan Rows': number;
  'Actual Rows'?: number;
  'Actual Loops'?: number;
  'Rows Removed by Filter'?: number;
  'Rows Removed by Index Recheck'?: number;
  'Parent Relationship'?: string;
  Plans?: PlanNode[];
}

/** The statements `run` sends to `database` (every application's), captured while it runs. */
export async function statementsDuring(database: string, run: () => Promise<unknown>): Promise<CapturedStatement[]> {
  const capture = captureStatements(database, () => true);
  let statements: CapturedStatement[] = [];
  await run().finally(() => {
    statements = capture.stop();
  });
  return statements;
}

export interface ScanFinding {
  node: string;
  relation: string;
  index: string | undefined;
  /**
   * Estimated plans: the rows the node is estimated to read over the whole statement (loops ×
   * rows, capped by a streaming LIMIT above it). Analyzed plans: the rows it really read,
   * including those its filter then removed.
   */
  rows: number;
}

/** Nodes that read all of their input before giving a row: a LIMIT above them does not bound what is under them. */
const BLOCKING = new Set([
  'Sort',
  'Incremental Sort',
  'Aggregate',
  'Hash',
  'Hash Join',
  'Merge Join',
  'SetOp',
  'WindowAgg',
  'Materialize',
  'Gather Merge',
  'Unique',
]);

/**
 * Every scan of a table in the plan with the rows it is estimated to read: a nested loop's
 * inner side runs once per outer row, and a LIMIT bounds what a streaming scan under it reads
 * (not what a sort or an aggregate under it reads).
 */
export function scansOf(plan: PlanNode): ScanFinding[] {
  const found: ScanFinding[] = [];
  const note = (node: PlanNode, rows: number) => {
    if (node['Relation Name'] !== undefined && node['Node Type'].includes('Scan'))
      found.push({ node: node['Node Type'], relation: node['Relation Name'], index: node['Index Name'], rows: Math.round(rows) });
  };
  if (plan['Actual Loops'] !== undefined) {
    const visitActual = (node: PlanNode): void => {
      const perLoop = (node['Actual Rows'] ?? 0) + (node['Rows Removed by Filter'] ?? 0) + (node['Rows Removed by Index Recheck'] ?? 0);
      note(node, perLoop * (node['Actual Loops'] ?? 1));
      for (const child of node.Plans ?? []) visitActual(child);
    };
    visitActual(plan);
    return found;
  }
  const visit = (node: PlanNode, loops: number, cap: number): number => {
    let nextCap = cap;
    if (node['Node Type'] === 'Limit') nextCap = Math.min(cap, node['Plan Rows'] * loops);
    if (BLOCKING.has(node['Node Type'])) nextCap = Infinity;
    const children = node.Plans ?? [];
    if (node['Node Type'] === 'Nested Loop' && children.length === 2) {
      const outer = visit(children[0]!, loops, nextCap);
      visit(children[1]!, Math.max(1, outer), nextCap);
    } else {
      for (const child of children) {
        // an InitPlan runs once; a SubPlan once per row of its parent (bounded by the parent's estimate)
        const initPlan = child['Parent Relationship'] === 'InitPlan';
        visit(child, initPlan ? 1 : loops, initPlan ? Infinity : nextCap);
      }
    }
    const own = Math.min(node['Plan Rows'] * loops, cap);
    note(node, own);
    return own;
  };
  visit(plan, 1, Infinity);
  return found;
}

/** A value as node-postgres sends it (text), for EXECUTE's arguments, which take no parameters. */
function asText(value: unknown): string {
  if (Buffer.isBuffer(value)) return `\\x${value.toString('hex')}`;
  if (value instanceof Date) return value.toISOString();
  if (Array.isArray(value)) return `{${value.map((e) => (e === null || e === undefined ? 'NULL' : `"${asText(e).replace(/(["\\])/g, '\\$1')}"`)).join(',')}}`;
  if (typeof value === 'bigint') return value.toString();
  return typeof value === 'string' ? value : JSON.stringify(value); // objects (json), numbers, booleans
}

function literal(client: pg.Client, value: unknown): string {
  return value === null || value === undefined ? 'NULL' : client.escapeLiteral(asText(value));
}

export interface StatementPlans {
  /** The plan for the statement's own values (what an unnamed statement always gets). */
  custom: PlanNode;
  /** The generic plan (what a named prepared statement may switch to after five runs). */
  generic: PlanNode | undefined;
  /**
   * The custom plan as it ran (EXPLAIN ANALYZE in a transaction rolled back: nothing it wrote
   * stays, its notifications are never sent), with the rows each node really read; undefined
   * when the statement fails when run again with its values (e.g. a unique key it already used).
   */
  analyzed: PlanNode | undefined;
  /**
   * The generic plan as it ran (rolled back): its estimates can be far off when the statistics
   * predate the rows (a backlog queued since the last ANALYZE), so only running it shows what it
   * reads. Undefined as `analyzed` is.
   */
  analyzedGeneric: PlanNode | undefined;
  /**
   * The statements run inside the statement, as they ran (auto_explain's nested plans, with the
   * rows each node read): a function's (the fair claim is tes_claim_fair) and its triggers'.
   * EXPLAIN of the statement itself shows a function as one Function Scan and a trigger as a
   * time, so without these a scan of history inside one would pass unseen. Custom plans, then
   * generic ones (a function's statements switch too, after five runs in a session).
   */
  nestedAnalyzed: NestedPlan[];
  nestedAnalyzedGeneric: NestedPlan[];
}

/** A statement the executor ran, as auto_explain reports it: its text (a function's own statement, a trigger's) and its plan as it ran. */
export interface NestedPlan {
  query: string;
  plan: PlanNode;
}

/** Each plan of a statement with its kind, for a check to judge them all alike. */
export function plansToJudge(plans: StatementPlans): [kind: string, plan: PlanNode][] {
  const top: [string, PlanNode | undefined][] = [
    ['custom', plans.custom],
    ['generic', plans.generic],
    ['analyzed', plans.analyzed],
    ['generic analyzed', plans.analyzedGeneric],
  ];
  return [
    ...top.filter((e): e is [string, PlanNode] => e[1] !== undefined),
    ...plans.nestedAnalyzed.map((n): [string, PlanNode] => ['nested analyzed', n.plan]),
    ...plans.nestedAnalyzedGeneric.map((n): [string, PlanNode] => ['nested generic analyzed', n.plan]),
  ];
}

/**
 * Runs `run` on `client`, inside its open transaction, with auto_explain reporting every
 * statement the executor runs, nested ones included, as a NOTICE to this client; returns their
 * plans. A statement under EXPLAIN ANALYZE is reported itself too; one run bare is reported
 * with its next statement (node-postgres reads the notice after the answer), its nested ones
 * before its answer. Superuser only (LOAD), as the tests connect. Throws when the reporting
 * cannot be set up (no transaction open, auto_explain missing), so a check cannot pass on plans
 * it never saw; a failure of `run` itself is passed on.
 */
export async function withNestedPlans(client: pg.Client, run: () => Promise<unknown>): Promise<NestedPlan[]> {
  const plans: NestedPlan[] = [];
  const onNotice = (n: { message?: string }) => {
    const at = n.message?.indexOf('plan:\n') ?? -1;
    if (at < 0) return;
    const report = JSON.parse(n.message!.slice(at + 'plan:\n'.length)) as { 'Query Text': string; Plan: PlanNode };
    plans.push({ query: report['Query Text'], plan: report.Plan });
  };
  await client.query(`LOAD 'auto_explain'`);
  for (const [k, v] of [
    ['client_min_messages', 'notice'],
    ['auto_explain.log_min_duration', '0'],
    ['auto_explain.log_nested_statements', 'on'],
    ['auto_explain.log_analyze', 'on'],
    ['auto_explain.log_buffers', 'on'],
    ['auto_explain.log_timing', 'off'],
    ['auto_explain.log_format', 'json'],
    ['auto_explain.log_level', 'notice'],
  ])
    await client.query(`SET LOCAL ${k} = ${v}`);
  // SET LOCAL outside a transaction is only a warning, and sets nothing
  const level = await client.query<{ l: string }>(`SELECT current_setting('auto_explain.log_level') AS l`);
  if (level.rows[0]?.l !== 'notice') throw new Error('withNestedPlans: auto_explain is not reporting (is a transaction open?)');
  client.on('notice', onNotice);
  try {
    await run();
  } finally {
    client.off('notice', onNotice);
  }
  return plans;
}

/** The nested plans of a run that succeeded: at least the statement's own, else the reporting is broken. */
function reported(plans: NestedPlan[], s: CapturedStatement): NestedPlan[] {
  if (plans.length === 0) throw new Error(`auto_explain reported no plan for a statement that ran: ${s.text.slice(0, 120)}`);
  return plans;
}

export interface ExplainRows {
  'QUERY PLAN': { Plan: PlanNode }[];
}
const planOf = (res: pg.QueryResult<ExplainRows>): PlanNode => res.rows[0]!['QUERY PLAN'][0]!.Plan;

/** EXPLAIN of a captured statement: with its values, as a generic plan, and run (then rolled back), with what it ran inside. */
export async function explain(client: pg.Client, s: CapturedStatement): Promise<StatementPlans> {
  const custom = planOf(await client.query<ExplainRows>(`EXPLAIN (FORMAT JSON) ${s.text}`, s.values));
  let analyzed: PlanNode | undefined;
  let nestedAnalyzed: NestedPlan[] = [];
  await client.query('BEGIN');
  try {
    await client.query('SET LOCAL plan_cache_mode = force_custom_plan');
    let ran = false;
    const nested = await withNestedPlans(client, async () => {
      try {
        analyzed = planOf(await client.query<ExplainRows>(`EXPLAIN (ANALYZE, FORMAT JSON) ${s.text}`, s.values));
        ran = true;
      } catch {
        analyzed = undefined; // it fails when run again with its values (e.g. a unique key it already used)
      }
    });
    if (ran) nestedAnalyzed = reported(nested, s);
  } finally {
    await client.query('ROLLBACK');
  }
  if (s.values.length === 0) return { custom, generic: undefined, analyzed, analyzedGeneric: undefined, nestedAnalyzed, nestedAnalyzedGeneric: [] };
  await client.query('BEGIN');
  try {
    await client.query('SET LOCAL plan_cache_mode = force_generic_plan');
    await client.query(`PREPARE tes_plan_check AS ${s.text}`);
    const args = s.values.map((v) => literal(client, v)).join(', ');
    const generic = planOf(await client.query<ExplainRows>(`EXPLAIN (FORMAT JSON) EXECUTE tes_plan_check(${args})`));
    let analyzedGeneric: PlanNode | undefined;
    let nestedAnalyzedGeneric: NestedPlan[] = [];
    let ran = false;
    const nested = await withNestedPlans(client, async () => {
      await client.query('SAVEPOINT tes_plan_run');
      try {
        analyzedGeneric = planOf(await client.query<ExplainRows>(`EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE tes_plan_check(${args})`));
        ran = true;
      } catch {
        await client.query('ROLLBACK TO SAVEPOINT tes_plan_run');
      }
    });
    if (ran) nestedAnalyzedGeneric = reported(nested, s);
    return { custom, generic, analyzed, analyzedGeneric, nestedAnalyzed, nestedAnalyzedGeneric };
  } finally {
    // PREPARE is not transactional: the rollback keeps it, DEALLOCATE drops it
    await client.query('ROLLBACK');
    await client.query('DEALLOCATE ALL');
  }
}
