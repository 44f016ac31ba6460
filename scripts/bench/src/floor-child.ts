/**
 * The floor of our own stack for B1 and B3: an Express 5 app (the gateway's framework, the same
 * JSON body parser) that does the one database statement of the request through node-postgres
 * (a pool of the gateway's size, named prepared statements as the service prepares its hot
 * ones) and sends the row as JSON. Nothing else: no authentication, no limiter, no validation,
 * no publish. What the gateway adds on top of this is what B1's and B3's "vs floor" ratios price.
 *
 * - `GET /tools/executions/:id`: `SELECT <the execution's columns> FROM executions WHERE id = $1`
 *   on the bench's database (the real rows B1 polls), answered `{ data: row }` (404 when none).
 * - `POST /tools/:tool`: the submit's own statement (libs/db/src/executions/submit.ts
 *   `submitExecution`, captured from one call at start at node-postgres's query, so it is
 *   always the SQL the service runs), with real bindings so it inserts: a fresh execution id, the request's
 *   Idempotency-Key, its `arguments`, a fresh journal transaction id, on the pgbench scratch
 *   database's projects (`prj_pgb_1…N`, rotating; no relay watches that database's outbox).
 *   Answered 202 `{ data: row }`.
 *
 * Env: PORT, POLL_DATABASE_URL, SUBMIT_DATABASE_URL, SUBMIT_PROJECTS, POOL_MAX.
 */
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import express from 'express';
import knex from 'knex';
import pg from 'pg';
import { newId } from '@tes/core';
import { EXECUTION_SELECT, submitExecution } from '@tes/db';

const port = Number(process.env.PORT);
const poolMax = Number(process.env.POOL_MAX ?? 10);
const projects = Number(process.env.SUBMIT_PROJECTS ?? 1);
const pollPool = new pg.Pool({ connectionString: process.env.POLL_DATABASE_URL, max: poolMax });
const submitPool = new pg.Pool({ connectionString: process.env.SUBMIT_DATABASE_URL, max: poolMax });

const POLL_SQL = `SELECT ${EXECUTION_SELECT} FROM executions WHERE id = $1`;

/** Template values of the captured submit: each string binding that contains one is rewritten per request. */
const SENTINEL = { id: 'exe_FLOORSENTINELID', projectId: 'prj_FLOORSENTINELPROJECT', apiKeyId: 'key_FLOORSENTINELKEY', idem: 'FLOORSENTINELIDEM' };
const SENTINEL_ARGS = { floorSentinel: 'args' };
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

type Slot = { kind: 'const'; value: unknown } | { kind: 'template'; value: string } | { kind: 'args' } | { kind: 'uuid' };

/**
 * The submit's SQL and its bindings in order, as node-postgres receives them: one call of
 * submitExecution with sentinel values on a project that does not exist (so it writes nothing
 * and ends in a refusal, which is ignored), recorded at pg.Client#query (whether knex or
 * libs/db's own prepared-statement path sends it) while that call runs.
 */
async function captureSubmit(url: string): Promise<{ sql: string; slots: Slot[] }> {
  const k = knex({ client: 'pg', connection: url, pool: { min: 0, max: 1 } });
  let captured: { sql: string; bindings: unknown[] } | undefined;
  const proto = pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown };
  const original = proto.query;
  proto.query = function (this: pg.Client, ...args: unknown[]): unknown {
    const config = args[0] as { text?: unknown; values?: unknown[] } | undefined;
    if (!captured && typeof config?.text === 'string' && /INSERT INTO executions/i.test(config.text)) {
      captured = { sql: config.text, bindings: config.values ?? [] };
    }
    return original.apply(this, args);
  };
  try {
    await submitExecution(k, {
      id: SENTINEL.id,
      projectId: SENTINEL.projectId,
      apiKeyId: SENTINEL.apiKeyId,
      tool: 'test.sleep',
      model: 'sleep',
      category: 'test',
      arguments: SENTINEL_ARGS,
      priceVersion: 'bench',
      totalSteps: 1,
      reservedMicros: 1,
      idempotencyKey: SENTINEL.idem,
      requestDigest: 'ab'.repeat(32),
      dispatchDeadlineMs: 3_600_000,
    });
  } catch {
    // refused (no such project): expected, only the statement was wanted
  } finally {
    proto.query = original;
    await k.destroy();
  }
  if (!captured) throw new Error('the submit statement (INSERT INTO executions) was not captured: floor-child must change with submit.ts');
  const { bindings } = captured;
  // numbered placeholders ($1…$n): knex numbers one per occurrence of a name, libs/db's prepared path one per name
  if (!/\$1\b/.test(captured.sql)) throw new Error('the captured submit statement has no $n placeholders');
  const argsJson = JSON.stringify(SENTINEL_ARGS);
  const slots = bindings.map((value): Slot => {
    if (value === argsJson) return { kind: 'args' };
    if (typeof value === 'string' && UUID.test(value)) return { kind: 'uuid' };
    if (typeof value === 'string' && Object.values(SENTINEL).some((s) => value.includes(s))) return { kind: 'template', value };
    return { kind: 'const', value };
  });
  if (!slots.some((s) => s.kind === 'args')) throw new Error('the submit statement takes no arguments binding: floor-child must change with submit.ts');
  return { sql: captured.sql, slots };
}

async function main(): Promise<void> {
  const submit = await captureSubmit(process.env.SUBMIT_DATABASE_URL!);
  let next = 0;

  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.use(express.json({ limit: '64kb', strict: true }));

  app.get('/', (_req, res) => {
    res.json({ data: { ready: true } }); // the harness waits for this
  });

  app.get('/tools/executions/:id', async (req, res) => {
    const { rows } = await pollPool.query<Record<string, unknown>>({ name: 'floor_poll', text: POLL_SQL, values: [req.params.id] });
    if (!rows[0]) res.status(404).json({ error: { code: 'not_found' } });
    else res.json({ data: rows[0] });
  });

  app.post('/tools/:tool', async (req, res) => {
    const p = 1 + (next++ % projects);
    const values: Record<string, string> = {
      [SENTINEL.id]: newId('exe'),
      [SENTINEL.projectId]: `prj_pgb_${p}`,
      [SENTINEL.apiKeyId]: `key_pgb_${p}`,
      [SENTINEL.idem]: String(req.headers['idempotency-key'] ?? randomUUID()),
    };
    const args = JSON.stringify((req.body as { arguments?: unknown }).arguments ?? {});
    const bound = submit.slots.map((s) => {
      if (s.kind === 'args') return args;
      if (s.kind === 'uuid') return randomUUID();
      if (s.kind === 'const') return s.value;
      let v = s.value;
      for (const [from, to] of Object.entries(values)) v = v.split(from).join(to);
      return v;
    });
    const { rows } = await submitPool.query<Record<string, unknown>>({ name: 'floor_submit', text: submit.sql, values: bound });
    if (!rows[0]) res.status(409).json({ error: { code: 'not_written' } });
    else res.status(202).json({ data: rows[0] });
  });

  const server = http.createServer(app);
  server.keepAliveTimeout = 65_000; // as the gateway
  server.listen(port, '127.0.0.1');
  process.once('SIGTERM', () => {
    server.close(() => void Promise.all([pollPool.end(), submitPool.end()]).then(() => process.exit(0)));
    server.closeAllConnections();
  });
}

main().catch((err: unknown) => {
  process.stderr.write(`floor-child: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
