import { randomBytes } from 'node:crypto';
import type { Knex } from 'knex';
import { isAppError, newId } from '@tes/core';
import {
  abandonExecution,
  cancelExecution,
  claimExecution,
  finishLastStepAndSettle,
  getExecution,
  reapExpiredLeases,
  recordUpload,
  settleExecution,
  startStep,
  submitExecution,
  sweepExpired,
  type SubmitResult,
} from '@tes/db';
import { seedProject } from '@tes/testing';
import { MIN, setClock } from '../ledger-model/model';
import type { Actor, Outcome } from './scheduler';

/*
 * The world of interleavings.test.ts: a project with a few executions in each state, the
 * concurrent operations (actors) that can run on it, each calling the real repository
 * functions the gateway, the worker and the relay call, and the invariants checked after a
 * schedule has run them all.
 */

export const CREDIT = 10_000_000;
/** The worker whose run of `expired` hangs: its stale run writes on (zombie), and it may claim the execution again. */
const DEAD_WORKER = 'dead-worker';
const RESERVE = 100_000;
const TTL = 65 * MIN;
/** The upload the original submit may name expires at +15 min; the clock actor moves to +20 min. */
const FILE_RETENTION = 15 * MIN;
const CLOCK_STEP = 20 * MIN;

export interface World {
  db: Knex;
  projectId: string;
  keyId: string;
  priceVersion: string;
  /** An upload that expires while the schedule runs (when the clock actor moves). */
  fileId: string;
  fileKey: string;
  /** Whether the submits of KEY name the upload (so the execution bound to KEY reads it). */
  readsFile: boolean;
  /** Queued, dispatch deadline at +5 min (the reaper re-dispatches it after the clock moved). */
  queued: string;
  /** Running under `live-worker` with a live lease and step 0 started. */
  running: string;
  runningLease: string;
  /** Running under DEAD_WORKER, lease expired 10 min ago, step 0 started. */
  expired: string;
  expiredLease: string;
  /** What the janitor deleted while an execution that has not ended read it. */
  deletedInUse: string[];
}

const submitInput = (w: Pick<World, 'projectId' | 'keyId' | 'priceVersion'>, id: string, key: string, fileIds: string[], deadlineMs = 25 * MIN) => ({
  id,
  projectId: w.projectId,
  apiKeyId: w.keyId,
  tool: 'test.sleep',
  model: 'default',
  category: 'test',
  arguments: {},
  priceVersion: w.priceVersion,
  totalSteps: 1,
  reservedMicros: RESERVE,
  idempotencyKey: key,
  requestDigest: 'digest',
  fileIds,
  dispatchDeadlineMs: deadlineMs,
});

/** A fresh project and its executions, at model time 0, written in order on the observer's pool. */
export async function makeWorld(db: Knex, priceVersion: string, readsFile: boolean): Promise<World> {
  await setClock(db, 0);
  const p = await seedProject(db, { creditMicros: CREDIT });
  const base = { projectId: p.projectId, keyId: p.keyId, priceVersion };
  const sha = randomBytes(32).toString('hex');
  const { file } = await recordUpload(db, {
    projectId: p.projectId,
    sha256: sha,
    format: 'png',
    mimeType: 'image/png',
    sizeBytes: 1,
    storageKey: `k/${sha}`,
    retentionMs: FILE_RETENTION,
  });
  const make = async (deadlineMs?: number) =>
    (await submitExecution(db, submitInput(base, newId('exe'), `setup-${newId('key')}`, [], deadlineMs))).execution.id;
  const queued = await make(5 * MIN);
  const running = await make();
  const expired = await make();
  // A claim's lease is what its run fences its writes with: the worker's id, or a token made of it
  // (the lease_owner the claim wrote, whichever release this is).
  const lease = async (id: string, owner: string, ttl: number) => (await claimExecution(db, id, owner, ttl))!.leaseOwner!;
  const runningLease = await lease(running, 'live-worker', TTL);
  const expiredLease = await lease(expired, DEAD_WORKER, -10 * MIN);
  for (const [id, owner] of [
    [running, runningLease],
    [expired, expiredLease],
  ] as const) {
    await startStep(db, { executionId: id, projectId: p.projectId, index: 0, name: 's0', owner });
  }
  return { db, ...base, fileId: file.id, fileKey: file.storageKey, readsFile, queued, running, runningLease, expired, expiredLease, deletedInUse: [] };
}

/** Ends what a run left open (failed, nothing charged) and its upload, so the next run's reaper and janitor see only their own world. */
export async function retireWorld(w: World): Promise<void> {
  const open = await w.db('executions').where({ project_id: w.projectId }).whereIn('status', ['queued', 'running', 'waiting', 'needs_review']).select('id');
  for (const { id } of open as { id: string }[]) {
    await settleExecution(w.db, {
      executionId: id,
      projectId: w.projectId,
      status: 'failed',
      chargedMicros: 0,
      from: ['queued', 'running', 'waiting', 'needs_review'],
    });
  }
  await w.db('files').where({ project_id: w.projectId }).whereNull('deleted_at').update({ deleted_at: w.db.fn.now() });
}

// ---- the actors ----

export const KEY = 'the-key';
/** The execution bound to KEY once a submit of it has answered (a client learns the id then; the gateway publishes its message then). */
export function bound(outcomes: ReadonlyMap<string, Outcome>): string | undefined {
  for (const o of outcomes.values()) {
    const v = o.ok === true ? (o.value as { kind?: unknown; id?: unknown }) : undefined;
    if (v && (v.kind === 'created' || v.kind === 'existing') && typeof v.id === 'string' && v.id.startsWith('exe')) return v.id;
  }
  return undefined;
}
const isBound = (o: ReadonlyMap<string, Outcome>) => bound(o) !== undefined;

/** A submit of KEY: the original, or a client's resend of it (same key, its own new id). */
function submitActor(w: World, name: string): Actor {
  return {
    name,
    run: async (db) => {
      try {
        const res: SubmitResult = await submitExecution(db, submitInput(w, newId('exe'), KEY, w.readsFile ? [w.fileId] : []));
        return { kind: res.kind, id: res.execution.id };
      } catch (err) {
        if (isAppError(err) && err.code === 'file_not_found') return { kind: 'file_not_found' };
        throw err;
      }
    },
  };
}

/** A submit of another key on the same project: one more writer of the balance row. */
function otherSubmitActor(w: World): Actor {
  return {
    name: 'submit(other key)',
    run: async (db) => ({ kind: (await submitExecution(db, submitInput(w, newId('exe'), `other-${newId('key')}`, []))).kind }),
  };
}

export const COST = 1_234;

/**
 * A worker as services/worker runs an execution of one step: claim, start the step (the cancel
 * fence), then the step's end and the settlement in one statement. `claimAs`: a worker given the
 * execution's message; `lease`: a run that holds (or held) a lease already, which it fences with.
 */
function work(w: World, db: Knex, id: string, worker: { claimAs: string } | { lease: string }): Promise<string> {
  const go = async () => {
    let owner: string;
    if ('claimAs' in worker) {
      const claimed = await claimExecution(db, id, worker.claimAs, TTL);
      if (!claimed) return 'not claimed';
      owner = claimed.leaseOwner!;
    } else owner = worker.lease;
    const started = await startStep(db, { executionId: id, projectId: w.projectId, index: 0, name: 's0', owner });
    if (started === 'lease_lost') return 'lease lost';
    const status = started === 'started' ? 'succeeded' : 'cancelled';
    const charge = started === 'started' ? COST : 0;
    const settled = await finishLastStepAndSettle(
      db,
      { executionId: id, projectId: w.projectId, index: 0, owner, status, costMicros: charge },
      { executionId: id, projectId: w.projectId, status, chargedMicros: charge, from: ['running'], leaseOwner: owner },
    );
    return settled ? `settled ${status}` : 'fenced';
  };
  return go();
}

/** Builds the actors of a run; the ones that need the bound id read it from the outcomes so far. */
export function actorsFor(w: World, names: readonly ActorName[]): Actor[] {
  const deleteObject = async (key: string) => {
    // The object goes now, while the janitor holds the row: the execution that names the upload
    // in its arguments must have ended (asked of the executions, not of execution_files, which
    // is what the janitor itself trusts).
    if (key !== w.fileKey || !w.readsFile) return;
    const readers = await w.db.raw<{ rows: unknown[] }>(
      `SELECT 1 FROM executions WHERE project_id = :projectId AND idempotency_key = :key AND status IN ('queued', 'running', 'waiting', 'needs_review')`,
      { projectId: w.projectId, key: KEY },
    );
    if (readers.rows.length > 0) w.deletedInUse.push(key);
  };
  const byName: Record<ActorName, () => Actor> = {
    original: () => submitActor(w, 'original'),
    resend: () => submitActor(w, 'resend'),
    'worker(bound)': () => ({ name: 'worker(bound)', startWhen: isBound, run: (db, outcomes) => work(w, db, bound(outcomes)!, { claimAs: 'w-bound' }) }),
    'cancel(bound)': () => ({
      name: 'cancel(bound)',
      startWhen: isBound,
      run: async (db, outcomes) => {
        const record = await getExecution(db, w.projectId, bound(outcomes)!);
        return (await cancelExecution(db, w.projectId, record!)).kind;
      },
    }),
    'submit(other key)': () => otherSubmitActor(w),
    'worker(running)': () => ({ name: 'worker(running)', run: (db) => work(w, db, w.running, { lease: w.runningLease }) }),
    'worker(queued)': () => ({ name: 'worker(queued)', run: (db) => work(w, db, w.queued, { claimAs: 'w-queued' }) }),
    'cancel(queued)': () => ({
      name: 'cancel(queued)',
      run: async (db) => (await cancelExecution(db, w.projectId, (await getExecution(db, w.projectId, w.queued))!)).kind,
    }),
    'worker(expired)': () => ({ name: 'worker(expired)', run: (db) => work(w, db, w.expired, { claimAs: 'w-takeover' }) }),
    'zombie(expired)': () => ({ name: 'zombie(expired)', run: (db) => work(w, db, w.expired, { lease: w.expiredLease }) }),
    // the reaper re-dispatched it and the message reached the same process again
    'reclaim(expired)': () => ({ name: 'reclaim(expired)', run: (db) => work(w, db, w.expired, { claimAs: DEAD_WORKER }) }),
    reaper: () => ({
      name: 'reaper',
      run: async (db) => {
        // as Relay.tick: re-dispatch what is past its deadline, then abandon the exhausted; one
        // lost lease exhausts an execution here, so the dead worker's execution is abandoned
        const r = await reapExpiredLeases(db, { limit: 100, maxAttempts: 1, redispatchMs: 15 * MIN });
        const abandoned = [];
        for (const id of r.exhausted)
          abandoned.push(await abandonExecution(db, { executionId: id, errorCode: 'delivery_limit_exceeded', errorMessage: 'test' }));
        return { requeued: r.requeued.length, abandoned };
      },
    }),
    janitor: () => ({
      name: 'janitor',
      // Nothing of this world expires before the clock moves: a pass before that finds nothing.
      startWhen: (o) => !names.includes('clock') || o.has('clock'),
      run: async (db) => (await sweepExpired(db, 'files', 100, deleteObject)).deleted,
    }),
    clock: () => ({
      name: 'clock',
      run: async (db) => {
        await setClock(db, CLOCK_STEP);
        return 'moved';
      },
    }),
  };
  return names.map((n) => byName[n]());
}

export const ACTOR_NAMES = [
  'original',
  'resend',
  'worker(bound)',
  'cancel(bound)',
  'submit(other key)',
  'worker(running)',
  'worker(queued)',
  'cancel(queued)',
  'worker(expired)',
  'zombie(expired)',
  'reclaim(expired)',
  'reaper',
  'janitor',
  'clock',
] as const;
export type ActorName = (typeof ACTOR_NAMES)[number];
