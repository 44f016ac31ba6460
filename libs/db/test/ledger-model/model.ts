import type fc from 'fast-check';
import type { Knex } from 'knex';
import type { ExecutionStatus } from '@tes/core';

/*
 * The in-memory model of ledger-model.test.ts: its state, its constants and the money and
 * state rules it predicts the database by (docs/api.md#money, docs/api.md#states-and-moves).
 */

export interface MStep {
  status: 'running' | 'succeeded' | 'failed';
  cost: number;
  external: boolean;
  attempts: number;
}
export interface MExec {
  id: string;
  project: number;
  key: string;
  status: ExecutionStatus;
  reserved: number;
  charged: number;
  cancelRequested: boolean;
  owner: string | null;
  deadline: number | null;
  attempts: number;
  claims: number;
  createdAt: number;
  steps: MStep[];
  outboxTotal: number;
  outboxUnsent: number;
  files: string[];
}
export interface MFile {
  id: string;
  project: number;
  expiresAt: number;
  deleted: boolean;
}
export interface MProject {
  available: number;
  reserved: number;
  capMonth: string | null;
  monthCharged: number;
  cap: number | null;
  usage: Map<string, { settled: number; settledCharge: number }>;
}
export interface Model {
  projects: MProject[];
  execs: MExec[];
  files: MFile[];
  seq: number;
  clock: number;
  prices: string[];
}
export interface Real {
  db: Knex;
  projectIds: string[];
  keyIds: string[];
}
export type Cmd = fc.AsyncCommand<Model, Real>;

export const MAX_ATTEMPTS = 2; // small, so the reaper's "exhausted" branch is reachable in short sequences
export const INITIAL_CREDIT = 400_000;
/** Project 0 starts uncapped; 1 and 2 start with caps tight enough that reservations meet them. */
export const INITIAL_CAPS = [null, 250_000, 500_000];
export const MIN = 60_000;
/** Deadlines are odd multiples of 5 minutes and clock steps multiples of 10, so none is ever "now". */
export const LEASE_TTL_MS = 65 * MIN;
export const DISPATCH_MS = 25 * MIN;
export const RECHECK_MS = 45 * MIN;
export const REDISPATCH_MS = 15 * MIN;
/** The database's time at model time 0: five minutes before January ends (UTC). */
export const EPOCH = Date.parse('2027-01-31T23:55:00.000Z');

/** How often each interesting outcome happened, printed at the end: a model that never reaches a branch proves nothing about it. */
export const stats = { commandsRun: 0, hits: new Map<string, number>() };
export const hit = (what: string) => stats.hits.set(what, (stats.hits.get(what) ?? 0) + 1);

/** Sets the database's clock (tes_now()) to model time `t`, frozen there. */
export async function setClock(db: Knex, t: number): Promise<void> {
  await db.raw(
    `CREATE OR REPLACE FUNCTION tes_now() RETURNS timestamptz LANGUAGE sql STABLE PARALLEL SAFE AS $$ SELECT timestamptz '${new Date(EPOCH + t).toISOString()}' $$`,
  );
}
export const monthOf = (t: number) => new Date(EPOCH + t).toISOString().slice(0, 8) + '01';

// ---- the model's rules (docs/api.md#money, docs/api.md#states-and-moves) ----
export const isOpenForWork = (e: MExec) => e.status === 'queued' || e.status === 'running' || e.status === 'waiting';
export const succeededCost = (e: MExec) => e.steps.filter((s) => s.status === 'succeeded').reduce((a, s) => a + s.cost, 0);
export const isPast = (m: Model, deadline: number | null) => deadline !== null && deadline < m.clock;
export const claimable = (m: Model, e: MExec) => isOpenForWork(e) && (e.owner === null || isPast(m, e.deadline));
/** This month's charges as the cap sees them: the counter counts only while its month is the database's. */
export const monthCharged = (m: Model, p: MProject) => (p.capMonth !== null && p.capMonth >= monthOf(m.clock) ? p.monthCharged : 0);

export function settle(m: Model, e: MExec, status: ExecutionStatus, charge: number): number {
  const p = m.projects[e.project]!;
  const month = monthOf(m.clock);
  e.charged = Math.min(charge, e.reserved);
  e.status = status;
  e.owner = null;
  e.deadline = null;
  p.reserved -= e.reserved;
  p.available += e.reserved - e.charged;
  p.monthCharged = monthCharged(m, p) + e.charged;
  p.capMonth = p.capMonth !== null && p.capMonth > month ? p.capMonth : month;
  const u = p.usage.get(month) ?? { settled: 0, settledCharge: 0 };
  p.usage.set(month, { settled: u.settled + 1, settledCharge: u.settledCharge + e.charged });
  return e.charged;
}

/** abandonExecution's rule: an external step with no outcome may have cost money -> needs_review. */
export function abandon(m: Model, e: MExec): 'failed' | 'needs_review' | 'not_abandoned' {
  if (!(e.status === 'queued' || e.status === 'running') || !(e.owner === null || isPast(m, e.deadline))) return 'not_abandoned';
  if (e.steps.some((s) => s.status === 'running' && s.external)) {
    Object.assign(e, { status: 'needs_review', owner: null, deadline: null });
    return 'needs_review';
  }
  settle(m, e, 'failed', succeededCost(e));
  return 'failed';
}
