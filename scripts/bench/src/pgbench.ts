import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { createTestDatabase, type TestDatabase } from '@tes/testing';
import type { CpuMeter } from './meter';
import { runProgram } from './procs';

/**
 * The database ceiling for B3/B4: pgbench running the submit transaction of
 * libs/db/src/executions/submit.ts submitExecution, the same single statement (the conditional
 * balance UPDATE, the execution, its outbox row and the journal entries), on a
 * scratch database cloned from the same migrated template, over TCP with prepared
 * statements (-M prepared), as the service runs them (libs/db/src/prepared.ts). Hazard: if submitExecution changes, this script must
 * change with it or the ratio compares different work (it does: the file pins, the guard, tes_now()).
 */
const COLUMNS =
  'id, project_id, api_key_id, tool, model, category, status, arguments, price_version, total_steps, reserved_micros, ' +
  'charged_micros, cancel_requested, idempotency_key, request_digest, output, error_code, error_message, lease_owner, ' +
  'attempts, created_at, started_at, finished_at';

const SCRIPT = `\\set p random(1, :nprojects)
\\set r random(1, 999999999999)
WITH f AS (
   SELECT id FROM files
    WHERE project_id = 'prj_pgb_' || :p::text AND id = ANY('{}'::text[]) AND deleted_at IS NULL AND expires_at > tes_now()
      FOR SHARE
 ), p AS (
   UPDATE projects
      SET available_micros = available_micros - :amount::bigint,
          reserved_micros = reserved_micros + :amount::bigint
    WHERE id = 'prj_pgb_' || :p
      AND available_micros >= :amount::bigint
      AND (monthly_cap_micros IS NULL
           OR (CASE WHEN cap_month >= tes_month() THEN month_charged_micros ELSE 0 END)
              + reserved_micros + :amount::bigint <= monthly_cap_micros)
      AND (SELECT count(*) FROM f) = cardinality('{}'::text[])
      AND tes_submit_guard('tes.binding.prj_pgb_' || :p::text || '.idem_' || :client_id::text || '_' || :r::text, :pv::text,
                           'prj_pgb_' || :p::text, ('idem_' || :client_id || '_' || :r)::text)
    RETURNING id
 ), e AS (
   INSERT INTO executions (id, project_id, api_key_id, tool, model, category, status, arguments, price_version,
     total_steps, reserved_micros, idempotency_key, request_digest, lease_expires_at, created_at)
   SELECT ('exe_pgb_' || :client_id || '_' || :r)::text, p.id, ('key_pgb_' || :p)::text, 'test.sleep'::text, 'sleep'::text, 'test'::text, 'queued',
     :args::jsonb, :pv::text, 1::int, :amount::bigint, ('idem_' || :client_id || '_' || :r)::text, :digest::text,
     tes_now() + (60000 * interval '1 millisecond'), tes_now() FROM p
   RETURNING ${COLUMNS}
 ), ef AS (
   INSERT INTO execution_files (execution_id, file_id, project_id)
   SELECT e.id, f.id, e.project_id FROM e CROSS JOIN f
   RETURNING 1
 ), o AS (
   INSERT INTO outbox (project_id, execution_id, routing_key, payload)
   SELECT e.project_id, e.id, 'test'::text, jsonb_build_object('executionId', e.id, 'projectId', e.project_id) FROM e
   RETURNING id
 ), l AS (
   INSERT INTO ledger_entries (transaction_id, project_id, execution_id, kind, account, amount_micros)
   SELECT gen_random_uuid()::text, e.project_id, e.id, 'reserve', v.account, v.amount
     FROM e CROSS JOIN (VALUES ('available', -:amount::bigint), ('reserved', :amount::bigint)) AS v(account, amount)
   RETURNING 1
 )
 SELECT e.*, (SELECT id FROM o) AS outbox_id FROM e;
`;

export interface PgbenchResult {
  tps: number;
  latencyAvgMs: number;
  failed: number;
  transactions: number;
  cpu?: Record<string, number>;
}

export function pgbenchPath(): string | undefined {
  try {
    return execFileSync('sh', ['-c', 'command -v pgbench'], { encoding: 'utf8' }).trim() || undefined;
  } catch {
    return undefined;
  }
}

export class PgbenchDb {
  private database: TestDatabase | undefined;
  private scriptFile = '';

  constructor(private readonly logDir: string) {}

  get url(): string {
    return this.database!.url;
  }

  /** A scratch database with `projects` funded projects (ids prj_pgb_1…) and a key each. */
  async prepare(projects: number): Promise<void> {
    this.database = await createTestDatabase();
    const c = new pg.Client({ connectionString: this.database.url });
    await c.connect();
    try {
      await c.query(`INSERT INTO organizations (id, name) VALUES ('org_pgb', 'pgbench')`);
      await c.query(
        `INSERT INTO projects (id, organization_id, name, available_micros)
         SELECT 'prj_pgb_' || i, 'org_pgb', 'pgbench ' || i, 1000000000000 FROM generate_series(1, $1::int) i`,
        [projects],
      );
      await c.query(
        `INSERT INTO api_keys (id, project_id, name, lookup_id, digest, scopes, role)
         SELECT 'key_pgb_' || i, 'prj_pgb_' || i, 'pgbench', 'pgb' || i, '\\x00'::bytea, '{}', 'ADMIN' FROM generate_series(1, $1::int) i`,
        [projects],
      );
      // the submit's guard compares with the current price version
      await c.query(`INSERT INTO price_versions (version, content_sha256, prices) VALUES ('bench', 'bench', '{}')`);
      await c.query('VACUUM ANALYZE');
    } finally {
      await c.end();
    }
    this.scriptFile = path.join(this.logDir, 'submit.pgbench.sql');
    writeFileSync(this.scriptFile, SCRIPT);
  }

  /** Runs the submit transaction over `projects` projects (1 = the hot-row variant). */
  async run(options: { projects: number; clients: number; durationSec: number; name: string; meter?: CpuMeter }): Promise<PgbenchResult> {
    const u = new URL(this.database!.url);
    const args = [
      '-h',
      u.hostname,
      '-p',
      u.port || '5432',
      '-U',
      decodeURIComponent(u.username || 'postgres'),
      '-n',
      '-M',
      'prepared',
      '-c',
      String(options.clients),
      '-j',
      '2',
      '-T',
      String(options.durationSec),
      '-f',
      this.scriptFile,
      '-D',
      `nprojects=${options.projects}`,
      '-D',
      'amount=1',
      '-D',
      'pv=bench',
      '-D',
      'args={"seconds":0,"steps":1,"costMicrosPerStep":1}',
      '-D',
      `digest=${'ab'.repeat(32)}`,
      u.pathname.slice(1),
    ];
    const { code, stdout } = await runProgram(options.name, 'pgbench', args, {
      logDir: this.logDir,
      env: { PGAPPNAME: 'tes-bench-pgbench' },
      onStart: (c) => options.meter?.label(c.pid, 'pgbench'),
    });
    const tps = /tps = ([\d.]+) \(without initial connection time\)/.exec(stdout);
    if (code !== 0 || !tps) throw new Error(`pgbench ${options.name} failed (exit ${code}); see ${path.join(this.logDir, `${options.name}.log`)}`);
    return {
      tps: Number(tps[1]),
      latencyAvgMs: Number(/latency average = ([\d.]+) ms/.exec(stdout)?.[1] ?? NaN),
      failed: Number(/number of failed transactions: (\d+)/.exec(stdout)?.[1] ?? 0),
      transactions: Number(/number of transactions actually processed: (\d+)/.exec(stdout)?.[1] ?? 0),
    };
  }

  async drop(): Promise<void> {
    await this.database?.drop();
    this.database = undefined;
  }
}
