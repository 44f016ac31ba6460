import type { Knex } from 'knex';

/**
 * Months of history in the shape the service writes it, made in SQL (generate_series) so a
 * million executions take minutes, not hours: for the bench's `--history=N` and the test that
 * checks every periodic and per-request statement's plan against a large history.
 *
 * Each execution is a finished one as the submit and the settlement leave it: the row
 * (settled, lease released, output or error), its steps (1 or 2, costs summing to the
 * charge), an artifact of its last step when it succeeded (deleted once expired, as the
 * janitor leaves it), its outbox row (published), its five journal entries (reserve: available
 * −r, reserved +r; settle: reserved −r, available r−c, charged c), a delivered webhook when
 * its project has an endpoint (one project in ten), and an upload of its own one time in
 * twenty (expired and deleted). Status mix: 96 % succeeded, 3 % failed, 1 % cancelled while
 * queued (no steps). Executions are spread over `projects` projects of their own (an
 * organization per ten, a key each) and over the `spanDays` before now, oldest first; their
 * ids are ULID-shaped (`exe_01J…`) and sort before any id made today, as older ids do.
 *
 * The money adds up, so the ledger audit passes: each project is credited (funding −C,
 * available +C) its history's charges plus `remainingMicros`, which is its available balance;
 * nothing is reserved. usage_counters hold each month's executions and charges (requests:
 * four per execution). Triggers are off while seeding (session_replication_role = replica):
 * the change notifications of a million rows would flood every listener, and no trigger
 * writes anything a finished history needs (webhook rows are written here).
 */
export interface HistoryOptions {
  executions: number;
  /** Projects the history is spread over (default: one per thousand executions, at least 10). */
  projects?: number;
  spanDays?: number;
  /** Executions per transaction. */
  batch?: number;
  remainingMicros?: number;
  /** Called after each batch with the executions seeded so far, and how many of them a stopped seed had written before this one. */
  onProgress?: (written: number, total: number, resumed: number) => void;
}

export interface SeededHistory {
  executions: number;
  /** Executions an earlier, stopped seed had written, which this one continued after (0: a fresh seed). */
  resumed: number;
  projects: number;
  projectIds: string[];
}

/** A ULID-shaped id (prefix + 26 characters of Crockford base32, digits only) for row `n` of a kind. */
const ulidSql = (prefix: string, n: string) => `'${prefix}_01J' || lpad((${n})::text, 23, '0')`;

/** One row per execution of the batch, with everything the tables below derive from it. */
const BATCH_ROWS = `
  SELECT i,
         ${ulidSql('exe', 'i')} AS id,
         ${ulidSql('prj', 'i % :projects')} AS project_id,
         ${ulidSql('key', 'i % :projects')} AS api_key_id,
         (ARRAY['image.render','image.transform','audio.speech','video.thumbnail','video.slideshow'])[1 + i % 5] AS tool,
         (ARRAY['sharp','sharp','espeak-ng','ffmpeg','ffmpeg'])[1 + i % 5] AS model,
         (ARRAY['image','image','audio','video','video'])[1 + i % 5] AS category,
         CASE WHEN i % 100 < 96 THEN 'succeeded' WHEN i % 100 < 99 THEN 'failed' ELSE 'cancelled' END AS status,
         1 + i % 2 AS steps,
         (1000 + (i % 7) * 1000)::bigint AS reserved,
         CASE WHEN i % 100 < 96 THEN (1000 + (i % 7) * 1000) - (i % 3) * 100 WHEN i % 100 < 99 THEN (i % 2) * 500 ELSE 0 END::bigint AS charged,
         now() - ((:total::bigint - i) * (:spanSeconds::float8 / :total::bigint)) * interval '1 second' AS created_at
    FROM generate_series(:lo::bigint, :hi::bigint) AS i`;

/** The batch's statements, in order; each reads the batch's rows from `h`. */
const BATCH_STATEMENTS = [
  `INSERT INTO executions (id, project_id, api_key_id, tool, model, category, status, arguments, price_version, total_steps,
     reserved_micros, charged_micros, cancel_requested, idempotency_key, request_digest, output, error_code, error_message,
     attempts, claims, created_at, started_at, finished_at, settled_at, updated_at)
   SELECT id, project_id, api_key_id, tool, model, category, status,
          jsonb_build_object('text', 'history ' || i, 'width', 512, 'height', 512), '2026-10-01.1', steps, reserved, charged,
          status = 'cancelled', 'idem-' || i, md5('digest' || i),
          CASE WHEN status = 'succeeded' THEN jsonb_build_object('artifacts', jsonb_build_array(jsonb_build_object(
            'id', ${ulidSql('art', 'i')}, 'format', 'png', 'mimeType', 'image/png', 'sizeBytes', 20000 + i % 5000,
            'sha256', md5('art' || i) || md5('sha' || i),
            'expiresAt', to_char((created_at + interval '30 days') AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')))) END,
          CASE WHEN status = 'failed' THEN 'provider_error' END, CASE WHEN status = 'failed' THEN 'the provider failed' END,
          CASE WHEN status = 'cancelled' THEN 0 ELSE 1 END, CASE WHEN status = 'cancelled' THEN 0 ELSE 1 END,
          created_at, CASE WHEN status <> 'cancelled' THEN created_at + interval '20 ms' END,
          created_at + interval '2 s', created_at + interval '2 s', created_at + interval '2 s'
     FROM h`,
  `INSERT INTO execution_steps (execution_id, project_id, index, name, status, cost_micros, attempts, started_at, finished_at)
   SELECT h.id, h.project_id, s, 'step-' || s,
          CASE WHEN h.status = 'failed' AND s = h.steps - 1 THEN 'failed' ELSE 'succeeded' END,
          CASE WHEN s = h.steps - 1 THEN h.charged - (h.steps - 1) * (h.charged / h.steps) ELSE h.charged / h.steps END,
          1, h.created_at + interval '30 ms' + s * interval '900 ms', h.created_at + interval '900 ms' + s * interval '900 ms'
     FROM h CROSS JOIN LATERAL generate_series(0, h.steps - 1) AS s
    WHERE h.status <> 'cancelled'`,
  `INSERT INTO artifacts (id, execution_id, project_id, step_index, format, mime_type, size_bytes, sha256, storage_key, file_name,
     expires_at, deleted_at, created_at)
   SELECT ${ulidSql('art', 'i')}, id, project_id, steps - 1, 'png', 'image/png', 20000 + i % 5000, md5('art' || i) || md5('sha' || i),
          'artifacts/' || project_id || '/' || id || '/' || (steps - 1) || '.png', id || '-' || (steps - 1) || '.png',
          created_at + interval '30 days',
          CASE WHEN created_at + interval '30 days' < now() THEN created_at + interval '30 days 1 minute' END, created_at + interval '2 s'
     FROM h WHERE status = 'succeeded'`,
  `INSERT INTO files (id, project_id, sha256, format, mime_type, size_bytes, storage_key, expires_at, deleted_at, created_at)
   SELECT ${ulidSql('file', 'i')}, project_id, md5('file' || i) || md5('f' || i), 'png', 'image/png', 50000,
          'uploads/' || project_id || '/' || ${ulidSql('file', 'i')}, created_at + interval '1 day',
          CASE WHEN created_at + interval '1 day' < now() THEN created_at + interval '1 day 1 minute' END, created_at - interval '1 s'
     FROM h WHERE i % 20 = 0`,
  `INSERT INTO execution_files (execution_id, file_id, project_id)
   SELECT id, ${ulidSql('file', 'i')}, project_id FROM h WHERE i % 20 = 0`,
  `INSERT INTO outbox (project_id, execution_id, routing_key, payload, attempts, created_at, published_at)
   SELECT project_id, id, category, jsonb_build_object('executionId', id, 'projectId', project_id), 1, created_at, created_at + interval '5 ms'
     FROM h`,
  `INSERT INTO ledger_entries (transaction_id, project_id, execution_id, kind, account, amount_micros, created_at)
   SELECT md5('reserve' || h.i)::uuid::text, h.project_id, h.id, 'reserve', v.account, v.amount, h.created_at
     FROM h CROSS JOIN LATERAL (VALUES ('available', -h.reserved), ('reserved', h.reserved)) AS v(account, amount)
   UNION ALL
   SELECT md5('settle' || h.i)::uuid::text, h.project_id, h.id, 'settle', v.account, v.amount, h.created_at + interval '2 s'
     FROM h CROSS JOIN LATERAL (VALUES ('reserved', -h.reserved), ('available', h.reserved - h.charged), ('charged', h.charged)) AS v(account, amount)`,
  `INSERT INTO webhook_deliveries (id, endpoint_id, project_id, execution_id, event_type, status, payload, event_at, attempts,
     next_attempt_at, last_status_code, created_at, delivered_at)
   SELECT 'msg_' || md5('whk' || i), ${ulidSql('whk', 'i % :projects')}, project_id, id, 'execution.' || status, 'delivered',
          jsonb_build_object('executionId', id, 'status', status), created_at + interval '2 s', 1, created_at + interval '2 s', 200,
          created_at + interval '2 s', created_at + interval '2100 ms'
     FROM h WHERE (i % :projects) % 10 = 0`,
];

/** Organizations, projects, keys and endpoints, before the executions. */
const OWNERS_SQL = [
  `INSERT INTO organizations (id, name, created_at)
   SELECT ${ulidSql('org', 'p')}, 'History org ' || p, now() - :spanSeconds::float8 * interval '1 second' - interval '1 day'
     FROM generate_series(0, (:projects::int - 1) / 10) AS p`,
  `INSERT INTO projects (id, organization_id, name, created_at)
   SELECT ${ulidSql('prj', 'p')}, ${ulidSql('org', 'p / 10')}, 'History project ' || p, now() - :spanSeconds::float8 * interval '1 second' - interval '1 day'
     FROM generate_series(0, :projects::int - 1) AS p`,
  `INSERT INTO api_keys (id, project_id, name, lookup_id, digest, scopes, role, created_at)
   SELECT ${ulidSql('key', 'p')}, ${ulidSql('prj', 'p')}, 'history key', 'hist' || lpad(p::text, 8, '0'), decode(md5('key' || p), 'hex'),
          ARRAY['tools:read','tools:execute','usage:read'], 'MEMBER', now() - :spanSeconds::float8 * interval '1 second' - interval '1 day'
     FROM generate_series(0, :projects::int - 1) AS p`,
  `INSERT INTO webhook_endpoints (id, project_id, url, secret, events, created_at)
   SELECT ${ulidSql('whk', 'p')}, ${ulidSql('prj', 'p')}, 'https://hooks.example.com/tes/' || p, md5('secret' || p),
          ARRAY['execution.succeeded','execution.failed','execution.cancelled'], now() - :spanSeconds::float8 * interval '1 second'
     FROM generate_series(0, :projects::int - 1) AS p WHERE p % 10 = 0`,
];

/** After the executions: the credits that fund them, the balances and the usage counters (one pass over the history). */
const TOTALS_SQL = [
  `CREATE TEMP TABLE history_charges ON COMMIT DROP AS
   SELECT project_id, sum(charged_micros)::bigint AS charged,
          sum(charged_micros) FILTER (WHERE finished_at >= date_trunc('month', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC')::bigint AS month_charged
     FROM executions WHERE id >= ${ulidSql('exe', '0')} AND id < 'exe_01K' AND project_id LIKE 'prj\\_01J%' GROUP BY project_id`,
  `INSERT INTO ledger_entries (transaction_id, project_id, execution_id, kind, account, amount_micros, reference, created_at)
   SELECT md5('credit' || c.project_id)::uuid::text, c.project_id, NULL, 'credit', v.account, v.amount, 'history-seed',
          now() - :spanSeconds::float8 * interval '1 second' - interval '1 hour'
     FROM history_charges c
     CROSS JOIN LATERAL (VALUES ('funding', -(c.charged + :remaining::bigint)), ('available', c.charged + :remaining::bigint)) AS v(account, amount)`,
  `UPDATE projects p SET available_micros = :remaining::bigint, month_charged_micros = coalesce(c.month_charged, 0),
          cap_month = date_trunc('month', now() AT TIME ZONE 'UTC')::date
     FROM history_charges c WHERE p.id = c.project_id`,
  `INSERT INTO usage_counters (project_id, month, request_count, execution_count, charged_micros)
   SELECT project_id, date_trunc('month', finished_at AT TIME ZONE 'UTC')::date, 4 * count(*), count(*), sum(charged_micros)
     FROM executions WHERE id >= ${ulidSql('exe', '0')} AND id < 'exe_01K' AND project_id LIKE 'prj\\_01J%'
    GROUP BY 1, 2
   ON CONFLICT (project_id, month) DO UPDATE
      SET request_count = usage_counters.request_count + excluded.request_count,
          execution_count = usage_counters.execution_count + excluded.execution_count,
          charged_micros = usage_counters.charged_micros + excluded.charged_micros`,
];

/**
 * Seeds `executions` finished executions of history (see above) into a migrated database, then
 * ANALYZEs, so plans are made with the history's statistics at once. Each batch is a
 * transaction and the ids are fixed, so a seed that was stopped continues after its last batch
 * (a 10 M seed takes most of an hour): pass the same options again. `resumed` says where from.
 */
export async function seedHistory(db: Knex, options: HistoryOptions): Promise<SeededHistory> {
  const total = options.executions;
  const projects = options.projects ?? Math.max(10, Math.round(total / 1000));
  const spanSeconds = (options.spanDays ?? 30) * 86_400;
  const batch = options.batch ?? 50_000;
  const remaining = options.remainingMicros ?? 1_000_000_000;
  const base = { projects, spanSeconds, total };
  const asReplica = async (trx: Knex.Transaction): Promise<void> => {
    await trx.raw('SET LOCAL session_replication_role = replica');
  };
  // the newest seeded id (the primary key's last entry) is how far a stopped seed got
  const last = await db.raw<{ rows: { id: string | null }[] }>(`SELECT max(id) AS id FROM executions WHERE id >= ${ulidSql('exe', '0')} AND id < 'exe_01K'`);
  const resumed = last.rows[0]?.id ? Number(last.rows[0].id.slice('exe_01J'.length)) : 0;
  if (resumed === 0) {
    await db.transaction(async (trx) => {
      await asReplica(trx);
      for (const sql of OWNERS_SQL) await trx.raw(sql, base);
    });
  }
  for (let lo = resumed + 1; lo <= total; lo += batch) {
    const hi = Math.min(total, lo + batch - 1);
    await db.transaction(async (trx) => {
      await asReplica(trx);
      await trx.raw(`CREATE TEMP TABLE h ON COMMIT DROP AS ${BATCH_ROWS}`, { ...base, lo, hi });
      for (const sql of BATCH_STATEMENTS) await trx.raw(sql, base);
    });
    options.onProgress?.(hi, total, resumed);
  }
  await db.transaction(async (trx) => {
    await asReplica(trx);
    for (const sql of TOTALS_SQL) await trx.raw(sql, { ...base, remaining });
  });
  await db.raw('ANALYZE');
  const projectIds = Array.from({ length: projects }, (_, p) => `prj_01J${String(p).padStart(23, '0')}`);
  return { executions: total, resumed, projects, projectIds };
}
