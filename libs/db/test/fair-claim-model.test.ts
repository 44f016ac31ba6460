import { newId } from '@tes/core';
import {
  auditLedger,
  claimNextFair,
  createOrganization,
  createProject,
  creditBalance,
  heartbeatWorkerSlots,
  publishPrices,
  setProjectCategoryLimit,
  settleExecution,
  submitExecution,
  type ClaimedExecution,
} from '@tes/db';
import { addKey, useTestDatabase } from '@tes/testing';
import * as previous from './previous-release/statements';

/**
 * The fair-share claim (issue #25) against a reference model of its order (docs/architecture.md#fair-share-of-the-worker-slots):
 * random submits from several projects in two organizations, random finishes, claims one at a
 * time and several at once. Every pick must equal the model's; no project or organization ever
 * runs more than its limit, whatever claims race; a claim that finds nothing means nothing is
 * claimable; and once submits stop, every execution is claimed (no starvation).
 */
const { db } = useTestDatabase({ poolMax: 8 });

afterEach(async () => {
  expect((await auditLedger(db)).problems).toEqual([]);
});

/** A small deterministic PRNG (mulberry32), so a failing seed can be replayed. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

interface Project {
  id: string;
  keyId: string;
  org: string;
  override: number | null;
}

interface Queued {
  id: string;
  project: Project;
  /** created_at in microseconds, as the database orders it */
  at: bigint;
}

/** The reference model: fair-share.md's order and limits, in plain code. */
class Model {
  queued: Queued[] = [];
  running = new Map<string, { project: Project; lease: string }>();
  constructor(
    readonly projects: Project[],
    readonly defaultLimit: number,
  ) {}

  projectLimit(p: Project): number {
    return p.override ?? this.defaultLimit;
  }
  orgLimit(p: Project): number {
    return Math.max(this.defaultLimit, p.override ?? 0);
  }
  runningOf(p: Project): number {
    return [...this.running.values()].filter((r) => r.project.id === p.id).length;
  }
  runningOfOrg(org: string): number {
    return [...this.running.values()].filter((r) => r.project.org === org).length;
  }

  /** The head of the project chosen by: fewest running in its organization, then in the project, then the oldest head. */
  pick(): Queued | null {
    let best: { q: Queued; key: [number, number, bigint, string] } | null = null;
    for (const p of this.projects) {
      const head = this.queued.filter((q) => q.project.id === p.id).sort((a, b) => (a.at < b.at ? -1 : a.at > b.at ? 1 : a.id < b.id ? -1 : 1))[0];
      if (!head) continue;
      if (this.runningOf(p) >= this.projectLimit(p) || this.runningOfOrg(p.org) >= this.orgLimit(p)) continue;
      const key: [number, number, bigint, string] = [this.runningOfOrg(p.org), this.runningOf(p), head.at, head.id];
      if (!best || less(key, best.key)) best = { q: head, key };
    }
    return best?.q ?? null;
  }

  claimed(id: string, lease: string): void {
    const at = this.queued.findIndex((q) => q.id === id);
    const [q] = this.queued.splice(at, 1);
    this.running.set(id, { project: q!.project, lease });
  }
}

function less(a: [number, number, bigint, string], b: [number, number, bigint, string]): boolean {
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return a[i]! < b[i]!;
  return false;
}

async function setup(category: string, seed: number) {
  const rnd = random(seed);
  const orgs = [await createOrganization(db, 'org A'), await createOrganization(db, 'org B')];
  const projects: Project[] = [];
  for (let i = 0; i < 5; i++) {
    const org = orgs[i < 3 ? 0 : 1]!;
    const project = await createProject(db, { organizationId: org.id, name: `p${i}` });
    await creditBalance(db, { projectId: project.id, micros: 100_000_000, reference: 'model' });
    const key = await addKey(db, project.id);
    projects.push({ id: project.id, keyId: key.id, org: org.id, override: null });
  }
  // one project gets an operator's limit above the default, one below
  projects[1]!.override = 4;
  projects[4]!.override = 1;
  for (const p of projects) if (p.override !== null) await setProjectCategoryLimit(db, { projectId: p.id, category, maxRunning: p.override });
  // 6 live slots (two workers) and a share of 0.5: a default limit of 3
  await heartbeatWorkerSlots(db, `wrk_model_a_${seed}`, { [category]: 4 });
  await heartbeatWorkerSlots(db, `wrk_model_b_${seed}`, { [category]: 2 });
  return { rnd, model: new Model(projects, 3) };
}

async function submit(category: string, p: Project, priceVersion: string): Promise<Queued> {
  const id = newId('exe');
  await submitExecution(db, {
    id,
    projectId: p.id,
    apiKeyId: p.keyId,
    tool: 'test.sleep',
    model: 'sleep',
    category,
    arguments: {},
    priceVersion,
    totalSteps: 1,
    reservedMicros: 10,
    idempotencyKey: id,
    requestDigest: 'd',
    dispatchDeadlineMs: 60_000,
  });
  const row = await db.raw<{ rows: { us: string }[] }>(`SELECT (extract(epoch FROM created_at) * 1000000)::bigint::text AS us FROM executions WHERE id = ?`, [
    id,
  ]);
  return { id, project: p, at: BigInt(row.rows[0]!.us) };
}

const claim = (category: string, owner: string): Promise<ClaimedExecution | null> =>
  claimNextFair(db, { category, owner, leaseTtlMs: 60_000, share: 0.5, ownSlots: 1 });

/** Limits read from the database, not the model: what really runs. */
async function assertLimits(category: string, model: Model): Promise<void> {
  const { rows } = await db.raw<{ rows: { project_id: string; n: string }[] }>(
    `SELECT project_id, count(*) AS n FROM executions WHERE category = ? AND status = 'running' GROUP BY project_id`,
    [category],
  );
  const byOrg = new Map<string, number>();
  for (const r of rows) {
    const p = model.projects.find((x) => x.id === r.project_id)!;
    expect(Number(r.n)).toBeLessThanOrEqual(model.projectLimit(p));
    byOrg.set(p.org, (byOrg.get(p.org) ?? 0) + Number(r.n));
  }
  for (const [org, n] of byOrg) {
    expect(n).toBeLessThanOrEqual(Math.max(...model.projects.filter((p) => p.org === org).map((p) => model.orgLimit(p))));
  }
}

it.each([11, 29, 47])(
  'claims follow the fair order and the limits under random submits, finishes and racing claimers (seed %i)',
  async (seed) => {
    const category = `fair${seed}`;
    const { priceVersion } = await publishPrices(db, { 'test.sleep': 1 });
    const { rnd, model } = await setup(category, seed);
    const pickOf = (n: number) => model.projects[Math.floor(rnd() * n)]!;
    // project 0 is the flood: it submits most of the work
    const submitter = () => (rnd() < 0.5 ? model.projects[0]! : pickOf(model.projects.length));
    let claims = 0;

    const finish = async () => {
      const ids = [...model.running.keys()];
      if (ids.length === 0) return;
      const id = ids[Math.floor(rnd() * ids.length)]!;
      const r = model.running.get(id)!;
      expect(
        await settleExecution(db, { executionId: id, projectId: r.project.id, status: 'succeeded', chargedMicros: 1, from: ['running'], leaseOwner: r.lease }),
      ).not.toBeNull();
      model.running.delete(id);
    };

    for (let step = 0; step < 160; step++) {
      const op = rnd();
      if (op < 0.4) {
        const p = submitter();
        const n = 1 + Math.floor(rnd() * 3);
        for (let i = 0; i < n; i++) model.queued.push(await submit(category, p, priceVersion));
      } else if (op < 0.7) {
        const expected = model.pick();
        const got = await claim(category, `wrk_${Math.floor(rnd() * 3)}`);
        expect(got?.id ?? null).toBe(expected?.id ?? null);
        if (got) model.claimed(got.id, got.lease);
        claims += got ? 1 : 0;
      } else if (op < 0.82) {
        // claimers racing: serialized by the category's lock, so together they take exactly what
        // the same number of picks one after another would
        const k = 2 + Math.floor(rnd() * 3);
        const got = (await Promise.all(Array.from({ length: k }, (_, i) => claim(category, `wrk_race_${i}`)))).filter((e) => e !== null);
        const shadow = new Model(model.projects, model.defaultLimit);
        shadow.queued = [...model.queued];
        shadow.running = new Map(model.running);
        const expected: string[] = [];
        for (let i = 0; i < k; i++) {
          const q = shadow.pick();
          if (!q) break;
          shadow.claimed(q.id, 'x');
          expected.push(q.id);
        }
        expect(got.map((e) => e.id).sort()).toEqual(expected.sort());
        for (const e of got) model.claimed(e.id, e.lease);
        claims += got.length;
      } else {
        await finish();
      }
      await assertLimits(category, model);
    }
    expect(claims).toBeGreaterThan(20);

    // No starvation: with submits over, finishing and claiming drains every project's queue.
    // Bound: each round either claims or finishes, so at most twice the work in rounds.
    const bound = 2 * (model.queued.length + model.running.size) + 1;
    let rounds = 0;
    while (model.queued.length > 0 || model.running.size > 0) {
      rounds += 1;
      expect(rounds).toBeLessThanOrEqual(bound);
      const expected = model.pick();
      const got = await claim(category, 'wrk_drain');
      expect(got?.id ?? null).toBe(expected?.id ?? null);
      if (got) model.claimed(got.id, got.lease);
      else await finish();
      await assertLimits(category, model);
    }
    const left = await db('executions').count({ n: '*' }).where({ category }).whereIn('status', ['queued', 'running']).first();
    expect(Number(left!.n)).toBe(0);
  },
  120_000,
);

it('while one project floods a category, another project with nothing running is claimed next', async () => {
  const category = 'fairflood';
  const { priceVersion } = await publishPrices(db, { 'test.sleep': 1 });
  const { model } = await setup(category, 5);
  const [flood, quiet] = [model.projects[0]!, model.projects[3]!];
  for (let i = 0; i < 30; i++) model.queued.push(await submit(category, flood, priceVersion));
  const first = (await claim(category, 'wrk_a'))!;
  expect(first.projectId).toBe(flood.id);
  model.claimed(first.id, first.lease);
  const late = await submit(category, quiet, priceVersion);
  model.queued.push(late);
  // the flood's 29 older executions do not go first: the quiet project runs nothing
  const next = (await claim(category, 'wrk_b'))!;
  expect(next.id).toBe(late.id);
});

it('a worker of the previous release claims by id beside the fair claim: nothing is claimed twice, and the fair claim counts its work', async () => {
  const category = 'fairmixed';
  const { priceVersion } = await publishPrices(db, { 'test.sleep': 1 });
  const { model } = await setup(category, 7);
  const p = model.projects[0]!;
  const q = [];
  for (let i = 0; i < 4; i++) q.push(await submit(category, p, priceVersion));
  // the old worker takes the second by id; the fair claim takes the head, then skips the taken one
  expect(await previous.claim(db, q[1]!.id, 'wrk_old', 60_000)).toMatchObject({ leaseOwner: 'wrk_old' });
  expect((await claim(category, 'wrk_new'))!.id).toBe(q[0]!.id);
  expect(await previous.claim(db, q[0]!.id, 'wrk_old', 60_000)).toBeNull();
  expect((await claim(category, 'wrk_new'))!.id).toBe(q[2]!.id);
  // the default limit is 3, and the old worker's claim counts toward it
  expect(await claim(category, 'wrk_new')).toBeNull();
  const running = await db('executions').count({ n: '*' }).where({ category, status: 'running' }).first();
  expect(Number(running!.n)).toBe(3);
});
