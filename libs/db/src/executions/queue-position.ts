/** A queued execution's place in line (issue #25): what `progress.queuePosition` and `progress.estimatedStartAt` show. */
import type { Knex } from 'knex';
import { iso } from '../time';
import type { ExecutionView, QueuePlace } from './records';

/** The starts of a category within this window give its recent start rate. */
const START_RATE_WINDOW_SECONDS = 300;
/**
 * At most this many of them: the newest. The rate is then that many over the time since the
 * oldest of them, so a busy category's estimate reads a bounded number of rows (100 starts a
 * second would otherwise be 30,000 rows a second per process and category).
 */
export const START_RATE_SAMPLE = 500;

/**
 * The place in line of each of these executions that is queued now (the others are absent from
 * the map), read in one statement from the current queued and running counts of their
 * categories, never from history.
 *
 * The estimate follows the claim's fair order (the `fair-share` rule: the project with the fewest
 * executions of the category running goes first, ties to the oldest head; first-in first-out
 * within a project) as if nothing finished meanwhile. For execution X of project P, with k of
 * P's queued executions ahead of it and r_P of P's running: P starts X once it has started the
 * k before it, which the order lets it do when every other project Q with queued work has
 * caught up to r_P + k running. So Q starts n = r_P + k - r_Q of its queued first (none when
 * n < 0), one more if its next head is older than X (at n, Q and P tie on running, and the tie
 * goes to the oldest head), never more than Q has queued. Position = 1 + k + the sum of those counts.
 *
 * What it leaves out, so it is an estimate: executions ending (they free slots but change no
 * order), per-project and per-organization limits (a project at its limit starts nothing until
 * one of its own ends, so its X may wait longer than its position says), the organization level
 * of the order (projects of one organization are counted as if each were alone), and work the
 * claim resumes outside the order (waiting executions, expired leases).
 *
 * Cost. Per call: the asked executions by primary key of execution_line (the live line only,
 * migration 20261127000020), and each asking project's line up to the newest execution asked
 * about (execution_line_queued_idx, once per project). Per category, at
 * most once a second per process (`maxAgeMs`; a snapshot shared by every read of the category,
 * so a poll of a queued execution does not walk every other project's line again): each
 * project's queued and running counts (execution_line's two partial indexes: the queued and
 * running executions now, never history), the first HEADS queued of each project with queued
 * work (one skip-scan probe and one short range per project), and the category's starts of the
 * last 5 minutes, the newest START_RATE_SAMPLE at most (executions_category_started_idx, read
 * backwards). The tie rule needs Q's (n+1)-th head; past the
 * first HEADS it is counted as starting first (the position is then at most one too high per such
 * project: an estimate that errs late, never early). Measured in docs/architecture.md#fair-share-of-the-worker-slots.
 */
export async function queuePlaces(db: Knex, ids: readonly string[], options: { maxAgeMs?: number } = {}): Promise<Map<string, QueuePlace>> {
  if (ids.length === 0) return new Map();
  // the asked executions that are queued, and k: their own project's queued executions ahead
  // (one pass over each project's line up to the newest asked about: a list page of 20 reads it once)
  const asked = await db.raw<{ rows: { id: string; project_id: string; category: string; created_at: Date; k: string }[] }>(
    `WITH me AS (
       SELECT l.execution_id AS id, l.project_id, l.category, l.created_at
         FROM execution_line l
        WHERE l.execution_id = ANY(:ids::text[]) AND l.status = 'queued'
     )
     SELECT me.id, me.project_id, me.category, me.created_at, r.k
       FROM me
       JOIN (
         SELECT r.id, r.k
           FROM (SELECT category, project_id, max(created_at) AS newest FROM me GROUP BY category, project_id) g
          CROSS JOIN LATERAL (
            SELECT a.execution_id AS id, row_number() OVER (ORDER BY a.created_at, a.execution_id) - 1 AS k
              FROM execution_line a
             WHERE a.status = 'queued' AND a.category = g.category AND a.project_id = g.project_id AND a.created_at <= g.newest
          ) r
          WHERE r.id = ANY(:ids::text[])
       ) r ON r.id = me.id`,
    { ids: [...ids] },
  );
  const places = new Map<string, QueuePlace>();
  const categories = [...new Set(asked.rows.map((r) => r.category))];
  const snapshots = new Map(await Promise.all(categories.map(async (c) => [c, await categorySnapshot(db, c, options.maxAgeMs ?? 1000)] as const)));
  for (const r of asked.rows) {
    const snap = snapshots.get(r.category)!;
    const k = Number(r.k);
    const mine = { createdAt: r.created_at.getTime(), id: r.id };
    const rP = snap.running.get(r.project_id) ?? 0;
    let before = 0;
    for (const [project, line] of snap.queued) {
      if (project === r.project_id) continue;
      // Q starts n before P has caught up with it, one more when its next head is older (the tie)
      const n = rP + k - (snap.running.get(project) ?? 0);
      if (n < 0) continue;
      before += Math.min(line.count, n);
      if (n < line.count) {
        const head = line.heads[n];
        if (head === undefined || head.createdAt < mine.createdAt || (head.createdAt === mine.createdAt && head.id < mine.id)) before += 1;
      }
    }
    const position = 1 + k + before;
    const estimatedStartAt = snap.started > 0 ? new Date(snap.now + (position * Math.max(snap.now - snap.firstStartedAt, 1000)) / snap.started) : null;
    places.set(r.id, { queuePosition: position, estimatedStartAt: iso(estimatedStartAt) });
  }
  return places;
}

/** The heads of each project's line a snapshot keeps (see queuePlaces: past them the tie is counted against the asker). */
const HEADS = 64;

interface CategorySnapshot {
  /** Per project with queued work: how many, and its first HEADS by (created_at, id). */
  queued: Map<string, { count: number; heads: { createdAt: number; id: string }[] }>;
  running: Map<string, number>;
  /** Starts in the last START_RATE_WINDOW_SECONDS (the newest START_RATE_SAMPLE at most), the first of them, and the database clock (ms). */
  started: number;
  firstStartedAt: number;
  now: number;
}

const snapshotCache = new WeakMap<Knex, Map<string, { at: number; snapshot: Promise<CategorySnapshot> }>>();

/** A category's line and slots now, shared for `maxAgeMs` by every read of this process. */
function categorySnapshot(db: Knex, category: string, maxAgeMs: number): Promise<CategorySnapshot> {
  let byCategory = snapshotCache.get(db);
  if (!byCategory) {
    byCategory = new Map<string, { at: number; snapshot: Promise<CategorySnapshot> }>();
    snapshotCache.set(db, byCategory);
  }
  const cached = byCategory.get(category);
  if (cached && Date.now() - cached.at < maxAgeMs) return cached.snapshot;
  const snapshot = readSnapshot(db, category);
  byCategory.set(category, { at: Date.now(), snapshot });
  snapshot.catch(() => byCategory.delete(category)); // a failed read is not kept
  return snapshot;
}

async function readSnapshot(db: Knex, category: string): Promise<CategorySnapshot> {
  const [counts, heads, rate] = await Promise.all([
    db.raw<{ rows: { project_id: string; queued: string; running: string }[] }>(
      `SELECT project_id, sum(queued) AS queued, sum(running) AS running FROM (
         SELECT project_id, count(*) AS queued, 0 AS running FROM execution_line WHERE status = 'queued' AND category = :category GROUP BY project_id
         UNION ALL
         SELECT project_id, 0, count(*) FROM execution_line WHERE status = 'running' AND category = :category GROUP BY project_id
       ) c GROUP BY project_id`,
      { category },
    ),
    // the projects with queued work (a skip scan: one probe each), then each one's first heads
    db.raw<{ rows: { project_id: string; created_at: Date; id: string }[] }>(
      `WITH RECURSIVE projects AS (
         SELECT (SELECT min(q.project_id) FROM execution_line q WHERE q.status = 'queued' AND q.category = :category) AS project_id
         UNION ALL
         SELECT (SELECT min(q.project_id) FROM execution_line q WHERE q.status = 'queued' AND q.category = :category AND q.project_id > p.project_id)
           FROM projects p WHERE p.project_id IS NOT NULL
       )
       SELECT p.project_id, h.created_at, h.id
         FROM projects p
        CROSS JOIN LATERAL (
          SELECT q.created_at, q.execution_id AS id FROM execution_line q
           WHERE q.status = 'queued' AND q.category = :category AND q.project_id = p.project_id
           ORDER BY q.created_at, q.execution_id LIMIT ${HEADS}
        ) h
        WHERE p.project_id IS NOT NULL
        ORDER BY p.project_id, h.created_at, h.id`,
      { category },
    ),
    // a literal window, not a parameter: a generic plan would guess a third of every start ever
    db.raw<{ rows: { started: string; first_at: Date | null; now: Date }[] }>(
      `SELECT count(*) AS started, min(started_at) AS first_at, tes_now() AS now FROM (
         SELECT started_at FROM executions
          WHERE category = :category AND started_at IS NOT NULL AND started_at > tes_now() - interval '${START_RATE_WINDOW_SECONDS} seconds'
          ORDER BY started_at DESC LIMIT ${START_RATE_SAMPLE}
       ) s`,
      { category },
    ),
  ]);
  const queued = new Map<string, { count: number; heads: { createdAt: number; id: string }[] }>();
  const running = new Map<string, number>();
  for (const c of counts.rows) {
    if (Number(c.queued) > 0) queued.set(c.project_id, { count: Number(c.queued), heads: [] });
    if (Number(c.running) > 0) running.set(c.project_id, Number(c.running));
  }
  for (const h of heads.rows) queued.get(h.project_id)?.heads.push({ createdAt: h.created_at.getTime(), id: h.id });
  const r = rate.rows[0]!;
  return { queued, running, started: Number(r.started), firstStartedAt: r.first_at?.getTime() ?? 0, now: r.now.getTime() };
}

/** The view with its place in line when it is queued (one more statement then; none otherwise). */
export async function withQueuePlace(db: Knex, view: ExecutionView): Promise<ExecutionView> {
  if (view.execution.status !== 'queued') return view;
  const place = await queuePlaces(db, [view.execution.id]);
  return { ...view, queue: place.get(view.execution.id) ?? null };
}
