import type { Knex } from 'knex';
import { auditLedger } from '@tes/db';
import { EPOCH, monthCharged, monthOf, stats, type Model, type Real } from './model';

// ---- comparison with the database after every command ----
export async function compare(m: Model, r: Real): Promise<void> {
  stats.commandsRun += 1;
  const db = r.db;
  const month = monthOf(m.clock);
  const projects = await db('projects as p')
    .leftJoin('usage_counters as u', function () {
      this.on('u.project_id', 'p.id').andOn('u.month', db.raw('tes_month()'));
    })
    .whereIn('p.id', r.projectIds)
    .select(
      'p.id',
      'p.available_micros',
      'p.reserved_micros',
      'p.monthly_cap_micros',
      'u.execution_count',
      'u.charged_micros',
      db.raw('CASE WHEN p.cap_month >= tes_month() THEN p.month_charged_micros ELSE 0 END AS month_charged'),
    );
  const byId = new Map(projects.map((p) => [p.id as string, p]));
  expect(
    r.projectIds.map((id) => {
      const p = byId.get(id)!;
      return {
        available: p.available_micros,
        reserved: p.reserved_micros,
        monthCharged: p.month_charged,
        cap: p.monthly_cap_micros,
        settled: p.execution_count ?? 0,
        settledCharge: p.charged_micros ?? 0,
      };
    }),
  ).toEqual(
    m.projects.map((p) => ({
      available: p.available,
      reserved: p.reserved,
      monthCharged: monthCharged(m, p),
      cap: p.cap,
      settled: p.usage.get(month)?.settled ?? 0,
      settledCharge: p.usage.get(month)?.settledCharge ?? 0,
    })),
  );

  const execs = await db.raw<{ rows: Record<string, unknown>[] }>(
    `SELECT e.id, e.status, e.reserved_micros, e.charged_micros, e.cancel_requested, e.lease_owner, e.attempts, e.claims,
            (extract(epoch FROM e.lease_expires_at) * 1000)::bigint - ?::bigint AS deadline,
            (SELECT coalesce(json_agg(json_build_object('status', s.status, 'cost', s.cost_micros, 'external', s.external,
                     'attempts', s.attempts) ORDER BY s.index), '[]'::json) FROM execution_steps s WHERE s.execution_id = e.id) AS steps,
            (SELECT count(*)::int FROM outbox o WHERE o.execution_id = e.id) AS outbox_total,
            (SELECT count(*)::int FROM outbox o WHERE o.execution_id = e.id AND o.published_at IS NULL) AS outbox_unsent,
            (SELECT coalesce(array_agg(f.file_id ORDER BY f.file_id), '{}') FROM execution_files f WHERE f.execution_id = e.id) AS files
       FROM executions e WHERE e.project_id = ANY(?::text[]) ORDER BY e.id`,
    [EPOCH, r.projectIds] as unknown as Knex.RawBinding[],
  );
  expect(
    execs.rows.map((e) => ({
      id: e.id,
      status: e.status,
      reserved: e.reserved_micros,
      charged: e.charged_micros,
      cancelRequested: e.cancel_requested,
      owner: e.lease_owner,
      deadline: e.deadline === null ? null : Number(e.deadline),
      attempts: e.attempts,
      claims: e.claims,
      steps: e.steps,
      outboxTotal: e.outbox_total,
      outboxUnsent: e.outbox_unsent,
      files: e.files,
    })),
  ).toEqual(
    [...m.execs]
      .sort((a, b) => (a.id < b.id ? -1 : 1))
      .map(({ project: _p, key: _k, createdAt: _c, files, ...rest }) => ({ ...rest, files: [...new Set(files)].sort() })),
  );

  const files = await db('files').whereIn('project_id', r.projectIds).select('id', 'deleted_at').orderBy('id');
  expect(files.map((f) => ({ id: f.id, deleted: f.deleted_at !== null }))).toEqual(
    [...m.files].sort((a, b) => (a.id < b.id ? -1 : 1)).map((f) => ({ id: f.id, deleted: f.deleted })),
  );

  // Runs share the database: only this run's projects (and project-less problems) count, so a
  // run that broke the ledger does not make every later, shrunk run fail with it.
  const audit = await auditLedger(db);
  const problems = audit.problems.filter((p) => p.projectId === undefined || r.projectIds.includes(p.projectId));
  if (problems.length > 0) throw new Error(`auditLedger: ${JSON.stringify(problems.slice(0, 5))}`);
}
