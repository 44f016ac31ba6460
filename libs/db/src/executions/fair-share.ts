/**
 * Fair share of a category's worker slots across projects and organizations (issue #25): which
 * queued execution a free slot claims, the limits a project and an organization are held to,
 * the slots workers advertise, and what an operator reads and sets.
 */
import type { Knex } from 'knex';
import { prepared } from '../prepared';
import { EXECUTION_SELECT } from './records';
import { claimByIdFrom, claimedFrom, type ClaimedExecution, type ClaimRow } from './lease';

/** How often a worker writes its slots to worker_slots. */
export const WORKER_SLOTS_HEARTBEAT_MS = 10_000;
/** A worker_slots row older than this no longer counts (its worker stopped or died). */
const WORKER_SLOTS_LIVE_MS = 30_000;
/** Rows older than this are deleted by the heartbeats, so the table holds live workers only. */
const WORKER_SLOTS_PRUNE_MS = 10 * 60_000;

export interface FairClaimInput {
  category: string;
  /** The worker's id; the claim's lease is `<owner>:<claims>`, as claimExecution writes it. */
  owner: string;
  leaseTtlMs: number;
  /** PROJECT_SLOT_SHARE: the share of the category's live slots one project (or organization) may hold. */
  share: number;
  /** The claiming worker's slots for the category: the capacity when no live worker_slots row exists. */
  ownSlots: number;
}

/**
 * The default limit of a category (the share of its live slots, at least 1) and its live
 * slots, as the claim computes them: tes_category_share (migration 20261127000030), the one
 * definition. Needs the bindings :category, :share, :ownSlots and :liveMs.
 */
const SHARE_CTE = `share AS (SELECT lim, live FROM tes_category_share(:category, :share::float8, :ownSlots::int, :liveMs::int))`;

/**
 * Claims the next queued execution of a category in the fair order, with a lease (as
 * claimExecution does); null when nothing queued in it is under its limits. One statement,
 * tes_claim_fair (migrations 20261127000030 and 31), so the claim is decided in one round trip:
 *
 * - The fair pick (docs/architecture.md#fair-share-of-the-worker-slots): among the projects with
 *   queued work in the category that are under their limit, and whose organization is under
 *   its limit, the one with the fewest running executions of the category in its organization,
 *   then the fewest running in the project, then the oldest head (created_at, then id); and of
 *   that project its head: first in, first out. A project's limit is the operator's override,
 *   else the share of the live slots (at least 1); its organization's is the share, or that
 *   override when it is higher.
 * - Claims of one category are serialized by a transaction-scoped advisory lock, taken before
 *   the pick's statement so its snapshot sees every claim committed before it: the limits hold
 *   exactly however many workers claim at once. The lock is held inside the server, for the
 *   pick and the statement's commit, never across a round trip to this process (held across
 *   two, it measured 15 ms a claim on a saturated machine where the pick runs in 0.5 ms).
 * - Cost: one probe of execution_line_queued_idx per project with queued work (a skip scan: the
 *   probe that finds a project finds its head), the running work from execution_line, each
 *   organization by its project's id (a scalar subquery: hashed, all of projects was read for
 *   each claim), and the picked row updated by its id, one probe of the primary key whatever the statistics say
 *   (joined instead, the plan once walked every queued row and ran the pick once per row:
 *   tests/e2e/claim-backlog.test.ts). No history enters it: execution_line holds the live line.
 *
 * A worker of the previous release claims by id (claimExecution without the pick): it may run
 * work beyond a limit during a rolling deploy. The UPDATE re-checks `status = 'queued'`, so
 * when such a claim takes the picked row first this returns null and the caller tries again on
 * its next message or finish. steps_recorded is read after the claim, with a fresh snapshot
 * (tes_steps_recorded, migration 20261126000022).
 */
export async function claimNextFair(db: Knex, input: FairClaimInput): Promise<ClaimedExecution | null> {
  const res = await prepared<{ rows: ClaimRow[] }>(
    db,
    'tes_claim_fair',
    `SELECT ${EXECUTION_SELECT}, tes_steps_recorded(c.id) AS steps_recorded
       FROM tes_claim_fair(:category, :share::float8, :ownSlots::int, :owner, :leaseTtlMs::int, :liveMs::int) c`,
    {
      category: input.category,
      share: input.share,
      ownSlots: input.ownSlots,
      owner: input.owner,
      leaseTtlMs: input.leaseTtlMs,
      liveMs: WORKER_SLOTS_LIVE_MS,
    },
  );
  return claimedFrom(res.rows);
}

/**
 * Resumes an execution that was already started, by id: running with an expired or released
 * lease, or waiting (a provider re-check). Fresh `queued` work is not claimed here: it goes
 * through the fair pick (claimNextFair). Otherwise as claimExecution (its lease, its
 * stepsRecorded). Index: the primary key.
 */
export async function resumeExecution(db: Knex, id: string, owner: string, leaseTtlMs: number): Promise<ClaimedExecution | null> {
  return claimByIdFrom(db, 'tes_resume', ['running', 'waiting'], { owner, leaseTtlMs, id });
}

/**
 * A worker's heartbeat in worker_slots: its slots per category, at the database's clock. Also
 * deletes rows long dead (a worker killed without its goodbye), so the table stays a few rows
 * per live worker.
 */
export async function heartbeatWorkerSlots(db: Knex, workerId: string, slots: Readonly<Record<string, number>>): Promise<void> {
  const entries = Object.entries(slots);
  if (entries.length === 0) return;
  await db.raw(
    `WITH up AS (
       INSERT INTO worker_slots (worker_id, category, slots, heartbeat_at)
       SELECT :workerId::text, c, s, tes_now() FROM unnest(:categories::text[], :slots::int[]) AS v(c, s)
       ON CONFLICT (worker_id, category) DO UPDATE SET slots = EXCLUDED.slots, heartbeat_at = EXCLUDED.heartbeat_at
       RETURNING 1
     )
     DELETE FROM worker_slots WHERE heartbeat_at < tes_now() - (${WORKER_SLOTS_PRUNE_MS} * interval '1 millisecond')`,
    { workerId, categories: entries.map(([c]) => c), slots: entries.map(([, s]) => s) },
  );
}

/** A worker's goodbye: its slots no longer count (its drain is under way). */
export async function clearWorkerSlots(db: Knex, workerId: string): Promise<void> {
  await db('worker_slots').where({ worker_id: workerId }).delete();
}

/** An operator's limit for one project in one category; null clears it (the default applies). */
export async function setProjectCategoryLimit(db: Knex, input: { projectId: string; category: string; maxRunning: number | null }): Promise<boolean> {
  if (input.maxRunning === null) {
    const n = await db('project_category_limits').where({ project_id: input.projectId, category: input.category }).delete();
    return n > 0;
  }
  await db.raw(
    `INSERT INTO project_category_limits (project_id, category, max_running) VALUES (:projectId, :category, :maxRunning)
     ON CONFLICT (project_id, category) DO UPDATE SET max_running = EXCLUDED.max_running, updated_at = now()`,
    input,
  );
  return true;
}

export interface CategoryHolder {
  projectId: string;
  organizationId: string;
  running: number;
  queued: number;
  /** Age of the project's oldest queued execution of the category, in seconds; null with none queued. */
  oldestQueuedSeconds: number | null;
  /** The project's limit in the category: its override, else the default. */
  limit: number;
  overridden: boolean;
}

export interface CategoryQueue {
  category: string;
  /** Sum of the slots live workers advertise for the category (0: no live worker). */
  liveSlots: number;
  /** The default limit of a project (and of an organization) in the category. */
  defaultLimit: number;
  running: number;
  queued: number;
  /** The projects holding or queueing the most work, most first; at most `top`. */
  projects: CategoryHolder[];
}

/**
 * Who holds and who queues a category now: running and queued per project, most first (the
 * admin's `queue show`, in place of a metric labelled by project). Reads the running work and
 * the queued work of the category from execution_line: it costs what is open now.
 * With no live worker the default limit is computed over `ownSlots` (the admin passes 1).
 */
export async function categoryQueue(db: Knex, input: { category: string; share: number; top: number }): Promise<CategoryQueue> {
  const res = await db.raw<{
    rows: {
      live: number;
      lim: number;
      project_id: string | null;
      organization_id: string | null;
      running: number;
      queued: number;
      oldest_queued_seconds: number | null;
      max_running: number | null;
      total_running: number;
      total_queued: number;
    }[];
  }>(
    `WITH ${SHARE_CTE}, per_project AS (
       SELECT project_id, sum(r)::int AS running, sum(q)::int AS queued, min(oldest) AS oldest FROM (
         SELECT project_id, count(*) AS r, 0 AS q, NULL::timestamptz AS oldest FROM execution_line
          WHERE status = 'running' AND category = :category GROUP BY project_id
         UNION ALL
         SELECT project_id, 0, count(*), min(created_at) FROM execution_line
          WHERE status = 'queued' AND category = :category GROUP BY project_id
       ) x GROUP BY project_id
     ), totals AS (
       SELECT coalesce(sum(running), 0)::int AS total_running, coalesce(sum(queued), 0)::int AS total_queued FROM per_project
     ), top AS (
       SELECT * FROM per_project ORDER BY running + queued DESC, project_id LIMIT :top
     )
     SELECT share.live, share.lim, totals.total_running, totals.total_queued, top.project_id, p.organization_id,
            top.running, top.queued, extract(epoch FROM tes_now() - top.oldest)::float8 AS oldest_queued_seconds, l.max_running
       FROM share CROSS JOIN totals
       LEFT JOIN top ON true
       LEFT JOIN projects p ON p.id = top.project_id
       LEFT JOIN project_category_limits l ON l.project_id = top.project_id AND l.category = :category
      ORDER BY top.running + top.queued DESC, top.project_id`,
    { category: input.category, share: input.share, ownSlots: 1, liveMs: WORKER_SLOTS_LIVE_MS, top: input.top },
  );
  const first = res.rows[0]!;
  return {
    category: input.category,
    liveSlots: first.live,
    defaultLimit: first.lim,
    running: first.total_running,
    queued: first.total_queued,
    projects: res.rows
      .filter((r) => r.project_id !== null)
      .map((r) => ({
        projectId: r.project_id!,
        organizationId: r.organization_id!,
        running: r.running,
        queued: r.queued,
        oldestQueuedSeconds: r.oldest_queued_seconds === null ? null : Math.round(r.oldest_queued_seconds * 10) / 10,
        limit: r.max_running ?? first.lim,
        overridden: r.max_running !== null,
      })),
  };
}
