import fc from 'fast-check';
import { newId } from '@tes/core';
import * as older from '../previous-release/older-statements';
import * as previous from '../previous-release/statements';
import { compare } from './compare';
import {
  claimable,
  EPOCH,
  hit,
  isOpenForWork,
  LEASE_TTL_MS,
  MIN,
  RECHECK_MS,
  settle,
  succeededCost,
  type Cmd,
  type MExec,
  type Model,
  type Real,
} from './model';

/*
 * Mixed versions (issue #26): commands that write as the code of other releases does, for
 * ledger-model-mixed.test.ts to interleave with the new code's commands (commands.ts). During a
 * rolling deploy, and after a rollback of the images, those writers run against the newest
 * schema; the model predicts what the schema makes of their writes, and every comparison and the
 * liveness check must still hold.
 *
 * - The previous release (previous-release/statements.ts, main at the last release): a worker
 *   that fences by its bare id, counts `claims`, and ends with a settle or a hand-back.
 * - An older release (previous-release/older-statements.ts, before migrations 10-12): a submit
 *   with no deadline and no execution_files rows, and a worker whose claim does not count
 *   `claims`, whose lease deadline comes from its own clock (now(), not tes_now()) and whose
 *   hand-back sets the deadline to NULL. The schema must give such rows a deadline (one minute
 *   from tes_now(), migration 20261126000020), link the uploads their arguments name
 *   (20261126000021), and a later claim must see the steps they ran (20261126000022).
 */

/** The deadline the schema gives an open row written without one (migration 20261126000020). */
const FILLED_DEADLINE_MS = 1 * MIN;

function command(label: string, check: (m: Readonly<Model>) => boolean, body: (m: Model, r: Real) => Promise<void>): Cmd {
  return {
    check,
    toString: () => label,
    run: async (m, r) => {
      await body(m, r);
      await compare(m, r);
    },
  };
}

const pickFrom = <T>(pool: T[], pick: number): T | undefined => (pool.length > 0 ? pool[pick % pool.length] : undefined);
const firstOpenStep = (e: MExec) => {
  const at = e.steps.findIndex((s) => s.status !== 'succeeded');
  return at === -1 ? e.steps.length : at;
};
/** A step started and ended by a worker: the model's record of it. */
function stepSucceeded(e: MExec, index: number, cost: number, external: boolean): void {
  const step = e.steps[index];
  if (step) Object.assign(step, { status: 'succeeded', cost, attempts: step.attempts + 1 });
  else e.steps.push({ status: 'succeeded', cost, external, attempts: 1 });
}

/**
 * The older release's submit. It checks the balance, and the cap against the process's month (the
 * database's month here is a later one, so its counter never counts: reserved plus this must fit);
 * it checks no price version and no upload, and writes no deadline and no execution_files rows.
 */
const olderSubmitCmd = fc
  .record({ project: fc.nat({ max: 2 }), reserve: fc.integer({ min: 0, max: 250_000 }), files: fc.array(fc.nat(), { maxLength: 2 }) })
  .map(({ project: i, reserve, files: picks }) =>
    command(
      `older.submit(p${i}, ${reserve}, files ${JSON.stringify(picks)})`,
      () => true,
      async (m, r) => {
        const p = m.projects[i]!;
        const mine = m.files.filter((f) => f.project === i);
        const files = mine.length > 0 ? picks.map((n) => mine[n % mine.length]!.id) : [];
        const expected = p.available >= reserve && (p.cap === null || p.reserved + reserve <= p.cap);
        const id = newId('exe');
        const key = `older-${(m.seq += 1)}`;
        const written = await older.submit(r.db, {
          id,
          projectId: r.projectIds[i]!,
          apiKeyId: r.keyIds[i]!,
          priceVersion: m.prices[0]!,
          reservedMicros: reserve,
          idempotencyKey: key,
          arguments: { n: m.seq, slides: files.map((fileId) => ({ fileId })) },
        });
        expect(written).toBe(expected);
        hit(`older.submit:${expected}`);
        if (!expected) return;
        p.available -= reserve;
        p.reserved += reserve;
        m.execs.push({
          id,
          project: i,
          key,
          status: 'queued',
          reserved: reserve,
          charged: 0,
          cancelRequested: false,
          owner: null,
          deadline: m.clock + FILLED_DEADLINE_MS,
          attempts: 0,
          claims: 0,
          // created_at is the real clock's (now()), years before the model's: the reaper's backoff is at its cap
          createdAt: -1e15,
          steps: [],
          outboxTotal: 1,
          outboxUnsent: 1,
          files,
        });
      },
    ),
  );

/**
 * An older-release worker: claim (attempts counted, `claims` not; a deadline from its own clock,
 * which is behind the database's here, so already past), one step run to its end (its start does
 * not look at cancel_requested), then a hand-back that sets the deadline to NULL.
 */
const olderWorkCmd = fc.record({ pick: fc.nat(), cost: fc.integer({ min: 0, max: 100_000 }) }).map(({ pick, cost }) =>
  command(
    `older.work(#${pick}, ${cost})`,
    (m) => m.execs.length > 0,
    async (m, r) => {
      // its claim compares deadlines with now(), which is behind the database's clock: only a lease nobody holds is free to it
      const free = (e: MExec) => isOpenForWork(e) && e.owner === null;
      const e = pickFrom(m.execs.filter(free), pick) ?? m.execs[pick % m.execs.length]!;
      const owner = `older-${(m.seq += 1)}`;
      const claimed = await older.claim(r.db, e.id, owner, LEASE_TTL_MS);
      expect(claimed !== null).toBe(free(e));
      hit(`older.claim:${free(e) ? e.status : 'refused'}`);
      if (!claimed) return;
      // its deadline comes from the process's clock: read (as compare.ts reads it), not predicted; past by the database's
      const read = await r.db.raw<{ rows: { deadline: string }[] }>(
        `SELECT (extract(epoch FROM lease_expires_at) * 1000)::bigint - :epoch::bigint AS deadline FROM executions WHERE id = :id`,
        { epoch: EPOCH, id: e.id },
      );
      const deadline = Number(read.rows[0]!.deadline);
      expect(deadline).toBeLessThan(m.clock);
      Object.assign(e, { status: 'running', owner, deadline, attempts: e.attempts + (e.status === 'waiting' ? 0 : 1) });
      const index = firstOpenStep(e);
      const projectId = r.projectIds[e.project]!;
      expect(await older.startStep(r.db, { executionId: e.id, projectId, index, owner })).toBe(true);
      expect(await older.finishStep(r.db, { executionId: e.id, index, owner, status: 'succeeded', costMicros: cost })).toBe(true);
      stepSucceeded(e, index, cost, false);
      expect(await older.releaseLease(r.db, e.id, owner)).toBe(true);
      // the NULL it writes becomes a deadline one minute away
      Object.assign(e, { owner: null, deadline: m.clock + FILLED_DEADLINE_MS });
    },
  ),
);

/**
 * A previous-release worker, on the model's clock (its statements read tes_now()): claim under its
 * bare id, one step, then a settle or a hand-back.
 */
const previousWorkCmd = fc
  .record({ pick: fc.nat(), cost: fc.integer({ min: 0, max: 100_000 }), end: fc.constantFrom('settle', 'release') })
  .map(({ pick, cost, end }) =>
    command(
      `previous.work(#${pick}, ${cost}, ${end})`,
      (m) => m.execs.length > 0,
      async (m, r) => {
        const e =
          pickFrom(
            m.execs.filter((x) => claimable(m, x)),
            pick,
          ) ?? m.execs[pick % m.execs.length]!;
        const owner = `previous-${(m.seq += 1)}`;
        const expected = claimable(m, e);
        const claimed = await previous.claim(r.db, e.id, owner, LEASE_TTL_MS);
        expect(claimed).toEqual(expected ? { leaseOwner: owner, firstClaim: e.claims === 0 } : null);
        hit(`previous.claim:${expected ? e.status : 'refused'}`);
        if (!claimed) return;
        Object.assign(e, { status: 'running', owner, deadline: m.clock + LEASE_TTL_MS, claims: e.claims + 1 });
        const projectId = r.projectIds[e.project]!;
        const index = firstOpenStep(e);
        const started = await previous.startStep(r.db, { executionId: e.id, projectId, index, owner });
        expect(started).toBe(e.cancelRequested ? 'cancel_requested' : 'started');
        if (started === 'started') {
          expect(await previous.finishStep(r.db, { executionId: e.id, index, owner, status: 'succeeded', costMicros: cost })).toBe(true);
          stepSucceeded(e, index, cost, false);
        }
        if (end === 'release' && started === 'started') {
          expect(await previous.releaseLease(r.db, e.id, owner, RECHECK_MS)).toBe(true);
          Object.assign(e, { owner: null, deadline: m.clock + RECHECK_MS });
          hit('previous.work:released');
          return;
        }
        const status = started === 'started' ? 'succeeded' : 'cancelled';
        const charged = await previous.settle(r.db, { executionId: e.id, projectId, status, chargedMicros: succeededCost(e), leaseOwner: owner });
        expect(charged).toBe(settle(m, e, status, succeededCost(e)));
        hit(`previous.work:${status}`);
      },
    ),
  );

export const mixedVersionCommands = [olderSubmitCmd, olderSubmitCmd, olderWorkCmd, olderWorkCmd, previousWorkCmd, previousWorkCmd];
