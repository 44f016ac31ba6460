import { randomBytes } from 'node:crypto';
import { seedProject, type SeededProject } from '@tes/testing';
import { FaultClient, type Submission } from './client';
import { Cluster, sleep } from './cluster';
import { checkInvariants, waitForEnd } from './invariants';

/**
 * A worker SIGTERMed mid-step, as in a rollout or a scale-in, run as real processes: the step it
 * is running finishes within the drain and is not run again; the execution's next step is left
 * to another worker; a step longer than the drain is aborted and released, and the other worker
 * runs it again from its start. SHUTDOWN_TIMEOUT_MS is 10 s here, so the drain is 5 s
 * (SHUTDOWN_TIMEOUT_MS − 5 s) and the process is gone by 10 s: the documented bound.
 */
const SHUTDOWN_TIMEOUT_MS = 10_000;
const DRAIN_MS = SHUTDOWN_TIMEOUT_MS - 5_000;

let cluster: Cluster;
let client: FaultClient;
const credits = new Map<string, number>();
const figures: Record<string, unknown> = {};

beforeAll(async () => {
  cluster = await Cluster.start({ env: { SHUTDOWN_TIMEOUT_MS: String(SHUTDOWN_TIMEOUT_MS) } });
  client = new FaultClient(cluster.baseUrl);
}, 60_000);

afterAll(async () => {
  await cluster?.shutdown();
  if (Object.keys(figures).length > 0) process.stdout.write(`\ndrain figures: ${JSON.stringify(figures)}\n`);
}, 60_000);

// each test starts its own pair: the worker it signals and the one that takes over
afterEach(async () => {
  await cluster.stop('worker#2');
}, 30_000);

async function seed(creditMicros = 1_000_000): Promise<SeededProject> {
  const p = await seedProject(cluster.db, { creditMicros });
  credits.set(p.projectId, creditMicros);
  return p;
}

async function submit(p: SeededProject, args: Record<string, unknown>): Promise<Submission> {
  const s = await client.prepare(p.secret, p.projectId, `drain-${randomBytes(4).toString('hex')}`, 'test.sleep', args);
  expect((await client.send(s)).status).toBe(202);
  return s;
}

interface StepRow {
  index: number;
  status: string;
  attempts: number;
  started_at: Date | null;
}

async function steps(id: string): Promise<StepRow[]> {
  return cluster.db('execution_steps').select('index', 'status', 'attempts', 'started_at').where({ execution_id: id }).orderBy('index');
}

async function until(check: () => Promise<boolean>, ms = 15_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await sleep(50);
  }
}

/** The executions a worker incarnation claimed, from its log. */
function claimedBy(lines: string[]): string[] {
  return lines.flatMap((l) => (l.includes('worker.execution.claimed') ? [/"executionId":"([^"]+)"/.exec(l)?.[1] ?? ''] : []));
}

/** SIGTERMs the worker the execution runs on, another one already up; resolves when it exited, with how long that took. */
async function sigterm(): Promise<{ exitMs: number; lines: string[]; code: number | null }> {
  const proc = cluster.process('worker')!;
  const at = Date.now();
  proc.child.kill('SIGTERM');
  const exit = await cluster.waitForExit('worker', SHUTDOWN_TIMEOUT_MS + 5_000);
  return { exitMs: Date.now() - at, lines: proc.lines, code: exit.code };
}

async function verify(subs: Submission[]): Promise<void> {
  await waitForEnd(cluster.db, subs, false, 30_000);
  const { problems } = await checkInvariants(cluster.db, client, subs, { credits, allowedStatuses: [200, 202] });
  expect(problems).toEqual([]);
}

it('a step running at SIGTERM finishes on its worker and is not run again; the next step and new work go to another worker', async () => {
  const p = await seed();
  // each step outlasts what is left of the drain once the first has ended: started on the draining
  // worker, the second step would be aborted and run again
  const s = await submit(p, { seconds: 4, steps: 2, costMicrosPerStep: 1_000 });
  const id = s.executionId!;
  await until(async () => (await steps(id)).some((r) => r.index === 0 && r.status === 'running'));
  const before = (await steps(id))[0]!;
  await cluster.start('worker#2');
  const draining = sigterm();
  // a message delivered to the draining worker is handed back, not claimed there
  await sleep(200);
  const late = await submit(p, { seconds: 0, steps: 1, costMicrosPerStep: 500 });
  const { exitMs, lines, code } = await draining;
  expect(code).toBe(0);
  expect(exitMs).toBeLessThan(SHUTDOWN_TIMEOUT_MS);
  await verify([s, late]);

  const after = await steps(id);
  expect(after.map((r) => [r.index, r.status, r.attempts])).toEqual([
    [0, 'succeeded', 1], // let finish: run once, never aborted
    [1, 'succeeded', 1], // not started by the draining worker: run once, by the other
  ]);
  expect(after[0]!.started_at).toEqual(before.started_at);
  expect(await cluster.db('executions').where({ id }).first()).toMatchObject({ status: 'succeeded', charged_micros: 2000 });
  expect(lines.some((l) => l.includes('worker.step.succeeded') && l.includes(id))).toBe(true);
  expect(claimedBy(lines)).toEqual([id]);
  expect(claimedBy(cluster.process('worker#2')!.lines)).toEqual(expect.arrayContaining([id, late.executionId!]));
  figures.finishedStep = { exitMs, drainMs: DRAIN_MS };
}, 60_000);

it('a step longer than the drain is aborted at its end, released, and run again from its start by another worker', async () => {
  const p = await seed();
  if (cluster.process('worker')?.exited === undefined) await cluster.stop('worker');
  await cluster.start('worker');
  const s = await submit(p, { seconds: 8, steps: 1, costMicrosPerStep: 1_000 });
  const id = s.executionId!;
  await until(async () => (await steps(id)).some((r) => r.index === 0 && r.status === 'running'));
  await cluster.start('worker#2');
  const { exitMs, lines, code } = await sigterm();
  expect(code).toBe(0);
  // aborted when the drain ran out, then released: the process is gone within SHUTDOWN_TIMEOUT_MS
  expect(exitMs).toBeGreaterThanOrEqual(DRAIN_MS - 500);
  expect(exitMs).toBeLessThan(SHUTDOWN_TIMEOUT_MS);
  expect(lines.some((l) => l.includes('worker.execution.released') && l.includes(id))).toBe(true);
  await verify([s]);
  expect((await steps(id)).map((r) => [r.index, r.status, r.attempts])).toEqual([[0, 'succeeded', 2]]);
  expect(await cluster.db('executions').where({ id }).first()).toMatchObject({ status: 'succeeded', charged_micros: 1000 });
  figures.releasedStep = { exitMs, drainMs: DRAIN_MS };
}, 60_000);
