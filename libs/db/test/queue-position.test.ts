import pg from 'pg';
import { newId } from '@tes/core';
import { auditLedger, categoryQueueStates, claimExecution, publishPrices, queuePlaces, START_RATE_SAMPLE, submitExecution, type QueuePlace } from '@tes/db';
import { seedProject, useTestDatabase } from '@tes/testing';
import { explain, scansOf, statementsDuring } from '../../../tests/plans';

/**
 * A queued execution's place in line (issue #25) against a reference: the fair order of
 * fair-share (the project with the fewest running executions of the category starts its oldest
 * queued one, ties to the oldest head), simulated pick by pick from the same state as if nothing
 * ended. Several projects (each its own organization, so the organization level of the order is
 * the project level), random line lengths, running counts and interleaved submit times.
 */
const { db, database } = useTestDatabase({ poolMax: 3 });

afterEach(async () => {
  expect((await auditLedger(db)).problems).toEqual([]);
});

interface Queued {
  id: string;
  projectId: string;
  createdAt: number;
}

/** Start order of the fair rule from this state: position of each queued execution, 1 = first. */
function referencePositions(queued: readonly Queued[], running: ReadonlyMap<string, number>): Map<string, number> {
  const lines = new Map<string, Queued[]>();
  for (const q of [...queued].sort((a, b) => a.createdAt - b.createdAt || (a.id < b.id ? -1 : 1))) {
    lines.set(q.projectId, [...(lines.get(q.projectId) ?? []), q]);
  }
  const run = new Map([...lines.keys()].map((p) => [p, running.get(p) ?? 0]));
  const positions = new Map<string, number>();
  for (let position = 1; positions.size < queued.length; position++) {
    let best: { project: string; head: Queued } | undefined;
    for (const [project, line] of lines) {
      const head = line[0];
      if (!head) continue;
      const better =
        !best ||
        run.get(project)! < run.get(best.project)! ||
        (run.get(project) === run.get(best.project) &&
          (head.createdAt < best.head.createdAt || (head.createdAt === best.head.createdAt && head.id < best.head.id)));
      if (better) best = { project, head };
    }
    lines.get(best!.project)!.shift();
    run.set(best!.project, run.get(best!.project)! + 1);
    positions.set(best!.head.id, position);
  }
  return positions;
}

/** A small deterministic PRNG (mulberry32), so a failing case can be replayed. */
function random(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

let priceVersion: string;

beforeAll(async () => {
  ({ priceVersion } = await publishPrices(db, { 'test.sleep': 1 }));
});

async function submit(projectId: string, keyId: string, category: string): Promise<string> {
  const id = newId('exe');
  await submitExecution(db, {
    id,
    projectId,
    apiKeyId: keyId,
    tool: 'test.sleep',
    model: 'sleep',
    category,
    arguments: {},
    priceVersion,
    totalSteps: 1,
    reservedMicros: 1,
    idempotencyKey: id,
    requestDigest: 'd',
    dispatchDeadlineMs: 600_000,
  });
  return id;
}

/** Submit times by the database clock, `secondsAgo` before now (several executions may share one). */
async function setCreatedAt(id: string, secondsAgo: number): Promise<void> {
  await db.raw(`UPDATE executions SET created_at = tes_now() - (? * interval '1 second') WHERE id = ?`, [secondsAgo, id]);
}

it.each([1, 2, 3, 4, 5, 6])('positions follow the fair order of several projects (case %i)', async (seed) => {
  const rand = random(seed);
  const category = `pos${seed}`;
  const projects = await Promise.all(Array.from({ length: 2 + Math.floor(rand() * 4) }, () => seedProject(db, { creditMicros: 1_000 })));
  const queued: Queued[] = [];
  const running = new Map<string, number>();
  for (const p of projects) {
    const lineLength = Math.floor(rand() * (rand() < 0.3 ? 40 : 6));
    for (let i = 0; i < lineLength; i++) {
      const id = await submit(p.projectId, p.keyId, category);
      // coarse times, so executions of several projects share one and the id breaks the tie
      const secondsAgo = Math.floor(rand() * 30);
      await setCreatedAt(id, secondsAgo);
      queued.push({ id, projectId: p.projectId, createdAt: -secondsAgo });
    }
    const runningCount = Math.floor(rand() * 4);
    for (let i = 0; i < runningCount; i++) expect(await claimExecution(db, await submit(p.projectId, p.keyId, category), 'w', 600_000)).not.toBeNull();
    running.set(p.projectId, runningCount);
  }
  // another category's line and slots change nothing here
  const other = projects[0]!;
  await submit(other.projectId, other.keyId, `${category}-other`);
  await claimExecution(db, await submit(other.projectId, other.keyId, `${category}-other`), 'w', 600_000);

  const places = await queuePlaces(
    db,
    queued.map((q) => q.id),
    { maxAgeMs: 0 },
  );
  const expected = referencePositions(queued, running);
  expect(new Map([...places].map(([id, p]) => [id, p.queuePosition]))).toEqual(expected);
  // positions are a permutation of 1..n: two executions never share a place
  expect(new Set([...places.values()].map((p) => p.queuePosition)).size).toBe(queued.length);
});

it('a running, ended or unknown execution has no place; a place read before any start has no estimated start', async () => {
  const p = await seedProject(db, { creditMicros: 1_000 });
  const first = await submit(p.projectId, p.keyId, 'quiet');
  const second = await submit(p.projectId, p.keyId, 'quiet');
  const before = await queuePlaces(db, [first, second, 'exe_unknown'], { maxAgeMs: 0 });
  expect(before.get(first)).toEqual({ queuePosition: 1, estimatedStartAt: null });
  expect(before.get(second)).toEqual({ queuePosition: 2, estimatedStartAt: null });
  expect(before.has('exe_unknown')).toBe(false);

  await claimExecution(db, first, 'w', 600_000);
  const after = await queuePlaces(db, [first, second], { maxAgeMs: 0 });
  expect(after.has(first)).toBe(false);
  expect(after.get(second)?.queuePosition).toBe(1);
  // one start in the last 5 minutes: a rate to base an estimate on, later than now
  const estimated = Date.parse(after.get(second)!.estimatedStartAt!);
  const now = (await db.raw<{ rows: { now: Date }[] }>('SELECT tes_now() AS now')).rows[0]!.now.getTime();
  expect(estimated).toBeGreaterThanOrEqual(now);
});

it('estimated starts follow the category start rate and grow with the position', async () => {
  const p = await seedProject(db, { creditMicros: 1_000 });
  // 10 starts spread over the last 100 s: one every 10 s
  for (let i = 0; i < 10; i++) {
    const id = await submit(p.projectId, p.keyId, 'rated');
    await claimExecution(db, id, 'w', 600_000);
    await db.raw(`UPDATE executions SET started_at = tes_now() - (? * interval '1 second') WHERE id = ?`, [100 - i * 10, id]);
  }
  const waiting = [await submit(p.projectId, p.keyId, 'rated'), await submit(p.projectId, p.keyId, 'rated')];
  const places = await queuePlaces(db, waiting, { maxAgeMs: 0 });
  const now = (await db.raw<{ rows: { now: Date }[] }>('SELECT tes_now() AS now')).rows[0]!.now.getTime();
  // position 1 -> about 10 s from now, position 2 -> about 20 s (the statement's clock is a few ms later)
  expect(Date.parse(places.get(waiting[0]!)!.estimatedStartAt!) - now).toBeGreaterThanOrEqual(9_900);
  expect(Date.parse(places.get(waiting[0]!)!.estimatedStartAt!) - now).toBeLessThan(10_500);
  expect(Date.parse(places.get(waiting[1]!)!.estimatedStartAt!) - now).toBeGreaterThanOrEqual(19_900);
  expect(Date.parse(places.get(waiting[1]!)!.estimatedStartAt!) - now).toBeLessThan(20_500);
});

it('the start rate of a busy category is read from its newest starts only: the rows read stay bounded however many started', async () => {
  const p = await seedProject(db, { creditMicros: 10_000 });
  // three samples' worth of starts in the last 5 minutes: one every 150 ms over the last 225 s
  const started: string[] = [];
  for (let i = 0; i < 3 * START_RATE_SAMPLE; i += 3) {
    started.push(...(await Promise.all([0, 1, 2].map(() => submit(p.projectId, p.keyId, 'busy')))));
  }
  for (let i = 0; i < started.length; i += 3) await Promise.all(started.slice(i, i + 3).map((id) => claimExecution(db, id, 'w', 600_000)));
  await db.raw(
    `UPDATE executions e SET started_at = tes_now() - (n.rank * interval '150 milliseconds')
       FROM (SELECT id, row_number() OVER (ORDER BY id) AS rank FROM executions WHERE category = 'busy' AND status = 'running') n
      WHERE e.id = n.id`,
  );
  await db.raw('ANALYZE executions'); // as the relay does when the live counts outgrow the statistics
  const waiting = await submit(p.projectId, p.keyId, 'busy');

  let places = new Map<string, QueuePlace>();
  const statements = await statementsDuring(database.name, async () => {
    places = await queuePlaces(db, [waiting], { maxAgeMs: 0 });
  });
  // the estimate still follows the rate: one start every 150 ms
  const now = (await db.raw<{ rows: { now: Date }[] }>('SELECT tes_now() AS now')).rows[0]!.now.getTime();
  const wait = Date.parse(places.get(waiting)!.estimatedStartAt!) - now;
  expect(wait).toBeGreaterThan(100);
  expect(wait).toBeLessThan(250);

  // and its statement, run again with its values, reads at most the sample of its starts
  const rate = statements.filter((s) => s.text.includes('started_at > tes_now()'));
  expect(rate).toHaveLength(1);
  const client = new pg.Client({ connectionString: database.url });
  await client.connect();
  try {
    // this table is a few pages, so the planner may rightly read it whole; production's is not:
    // plan as there, by the index
    await client.query('SET enable_seqscan = off; SET enable_bitmapscan = off');
    const reads = scansOf((await explain(client, rate[0]!)).analyzed!).map((scan) => scan.rows);
    expect(reads.length).toBeGreaterThan(0);
    expect(Math.max(...reads)).toBeLessThanOrEqual(START_RATE_SAMPLE);
  } finally {
    await client.end();
  }
});

it('the gauges: queued, running and the oldest queued age per category, by the database clock', async () => {
  const p = await seedProject(db, { creditMicros: 1_000 });
  const old = await submit(p.projectId, p.keyId, 'gauged');
  await setCreatedAt(old, 90);
  await submit(p.projectId, p.keyId, 'gauged');
  await claimExecution(db, await submit(p.projectId, p.keyId, 'gauged'), 'w', 600_000);
  await claimExecution(db, await submit(p.projectId, p.keyId, 'gauged-busy'), 'w', 600_000);
  const states = new Map((await categoryQueueStates(db)).map((s) => [s.category, s]));
  expect(states.get('gauged')).toMatchObject({ queued: 2, running: 1 });
  expect(states.get('gauged')!.oldestQueuedAgeSeconds).toBeGreaterThanOrEqual(90);
  expect(states.get('gauged')!.oldestQueuedAgeSeconds).toBeLessThan(95);
  expect(states.get('gauged-busy')).toEqual({ category: 'gauged-busy', queued: 0, running: 1, oldestQueuedAgeSeconds: 0 });
});
