import { randomBytes } from 'node:crypto';
import { seedProject, type SeededProject } from '@tes/testing';
import { startFakeProviders, type FakeProviders } from '../fake-providers';
import { FaultClient, type Submission } from './client';
import { Cluster, type ServiceName } from './cluster';
import { checkInvariants, waitForEnd, type Figures } from './invariants';

/**
 * kill -9 at every crash point of the money and work paths, on the compiled services run
 * as real processes. After each crash the killed service is restarted without the fault,
 * the client resends whatever lost its answer (same key, same body), and then: no 500, one
 * execution per key, every execution ended (needs_review only where a provider request's
 * outcome is unknown), one settlement per ended execution, balances = credits − charges,
 * ledger audit clean. The long outage tests (broker down, Postgres restart) are in
 * outages.faults.ts, run by `npm run test:faults`.
 */
let cluster: Cluster;
let fake: FakeProviders;
let client: FaultClient;
const credits = new Map<string, number>();
const figures: Record<string, Figures> = {};

beforeAll(async () => {
  fake = await startFakeProviders();
  cluster = await Cluster.start({ env: { ...fake.env, PROVIDER_ALLOW_PRIVATE_NETWORKS: '1', WAIT_RECHECK_MS: '150' } });
  client = new FaultClient(cluster.baseUrl);
}, 60_000);

afterAll(async () => {
  await cluster?.shutdown();
  await fake?.stop();
  if (Object.keys(figures).length > 0) {
    process.stdout.write(
      `\nkill -9 figures:\n${Object.entries(figures)
        .map(([k, f]) => `  ${k}: ${JSON.stringify(f)}`)
        .join('\n')}\n`,
    );
  }
}, 60_000);

async function seed(creditMicros = 1_000_000): Promise<SeededProject> {
  const p = await seedProject(cluster.db, { creditMicros });
  credits.set(p.projectId, creditMicros);
  return p;
}

const tag = () => randomBytes(4).toString('hex');

/** Asserts the service died by its own crash point (SIGKILL), not by some other failure. */
async function expectCrash(service: ServiceName, point: string): Promise<void> {
  const exit = await cluster.waitForExit(service, 30_000);
  expect(exit.signal).toBe('SIGKILL');
  expect(cluster.process(service)!.lines).toContain(`crash point ${point} reached: SIGKILL`);
}

async function resendLost(subs: Submission[]): Promise<void> {
  for (const s of subs) {
    const last = s.attempts[s.attempts.length - 1];
    if (!last || last.lost !== undefined) await client.sendUntilAnswered(s, 20_000);
  }
}

async function verify(name: string, subs: Submission[], allowNeedsReview = false): Promise<Figures> {
  await waitForEnd(cluster.db, subs, allowNeedsReview, 25_000);
  const { problems, figures: f } = await checkInvariants(cluster.db, client, subs, { credits, allowNeedsReview, allowedStatuses: [200, 202] });
  expect(problems).toEqual([]);
  figures[name] = f;
  return f;
}

describe('gateway killed', () => {
  /** Three sequential submits on a gateway that kills itself at `point`; then restart and resend. */
  async function crashGateway(point: string, crashAt: string): Promise<{ subs: Submission[]; beforeRestart: number[] }> {
    const p = await seed();
    const t = tag();
    const subs: Submission[] = [];
    for (let i = 0; i < 3; i++)
      subs.push(await client.prepare(p.secret, p.projectId, `gw-${t}-${i}`, 'test.sleep', { seconds: 0, steps: 1, costMicrosPerStep: 1_000 + i }));
    await cluster.restart('gateway', { TES_FAULT_CRASH_AT: crashAt });
    for (const s of subs) await client.send(s);
    await expectCrash('gateway', point);
    const beforeRestart = await Promise.all(
      subs.map(async (s) => Number((await cluster.db('executions').count({ n: '*' }).where({ project_id: s.projectId, idempotency_key: s.key }).first())!.n)),
    );
    await cluster.start('gateway');
    await resendLost(subs);
    return { subs, beforeRestart };
  }

  it('before the write: the submit is lost and nothing was written; the resend creates it exactly once', async () => {
    const { subs, beforeRestart } = await crashGateway('gateway.submit.before_write', 'gateway.submit.before_write@2');
    expect(subs[0]!.attempts[0]!.status).toBe(202);
    expect(subs[1]!.attempts[0]!.lost).toBeDefined();
    expect(beforeRestart[1]).toBe(0); // the statement was never sent
    // the first answer after the crash created the execution; one more resend replays it
    const created = subs[1]!.attempts.find((a) => a.status !== undefined)!;
    expect(created).toMatchObject({ status: 202, replayed: false });
    const again = await client.send(subs[1]!);
    expect(again.executionId).toBe(created.executionId);
    expect(again.replayed).toBe(true);
    await verify('gateway.submit.before_write', subs);
  }, 60_000);

  it('after commit: the answer is lost, the relay publishes the row, the resend replays the same execution', async () => {
    const { subs, beforeRestart } = await crashGateway('gateway.submit.after_commit', 'gateway.submit.after_commit@2');
    expect(subs[1]!.attempts[0]!.lost).toBeDefined();
    expect(beforeRestart[1]).toBe(1); // committed before the crash
    expect(subs[1]!.attempts.find((a) => a.status !== undefined)).toMatchObject({ replayed: true });
    await verify('gateway.submit.after_commit', subs);
  }, 60_000);

  it('after publish, before the outbox row is marked: the message may arrive twice; one execution, one settlement', async () => {
    const { subs } = await crashGateway('outbox.after_publish', 'outbox.after_publish@1');
    await verify('outbox.after_publish', subs);
    // the row the dead gateway never marked was published again by the relay
    const rows = await cluster.db('outbox').select('published_at').where({ execution_id: subs[0]!.executionId });
    expect(rows.every((r: { published_at: Date | null }) => r.published_at !== null)).toBe(true);
    expect(cluster.lines('relay').some((l) => l.includes('relay.outbox.published'))).toBe(true);
  }, 60_000);
});

describe('worker killed', () => {
  /** Submits to a worker that kills itself at `crashAt`, restarts a clean one, and waits for the end. */
  async function crashWorker(
    point: string,
    crashAt: string,
    tool: string,
    argsList: Record<string, unknown>[],
    env: Record<string, string> = {},
  ): Promise<Submission[]> {
    const p = await seed();
    const t = tag();
    const subs = await Promise.all(argsList.map((args, i) => client.prepare(p.secret, p.projectId, `wk-${t}-${i}`, tool, args)));
    await cluster.restart('worker', { TES_FAULT_CRASH_AT: crashAt, ...env });
    for (const s of subs) expect((await client.send(s)).status).toBe(202);
    await expectCrash('worker', point);
    await cluster.start('worker');
    return subs;
  }

  const steps = async (subs: Submission[]) =>
    (await cluster
      .db('execution_steps')
      .select('execution_id', 'index', 'status', 'attempts')
      .whereIn(
        'execution_id',
        subs.map((s) => s.executionId!),
      )) as { index: number; status: string; attempts: number }[];
  const sleeps = (n: number, steps: number, seconds: number) => Array.from({ length: n }, () => ({ seconds, steps, costMicrosPerStep: 500 }));

  it('before a step: the work resumes after the last completed step, no step runs twice', async () => {
    // one execution at a time, so the crash falls before the second step of the first one:
    // its first step completed, the second never started, and nothing else was running
    const subs = await crashWorker('worker.before_step', 'worker.before_step@2', 'test.sleep', sleeps(3, 2, 0.2), { WORKER_CONCURRENCY: '1' });
    await verify('worker.before_step', subs);
    const all = await steps(subs);
    expect(all).toHaveLength(6);
    expect(all.filter((s) => s.status === 'succeeded' && s.attempts === 1)).toHaveLength(6);
  }, 60_000);

  it('during a step: the interrupted step is rerun and charged once', async () => {
    const subs = await crashWorker('worker.during_step', 'worker.during_step@2', 'test.sleep', sleeps(3, 2, 0.2));
    const f = await verify('worker.during_step', subs);
    expect(f.byStatus).toEqual({ succeeded: 3 });
    expect(f.chargedMicros).toBe(3 * 2 * 500);
    expect((await steps(subs)).some((s) => s.attempts === 2)).toBe(true);
  }, 60_000);

  it('during a media program (espeak-ng): the program is orphaned, the step is rerun', async () => {
    const args = [0, 1].map((i) => ({ text: `Fault test number ${i}.`, voice: 'en-us', format: 'wav' }));
    const subs = await crashWorker('worker.during_program', 'worker.during_program@1', 'audio.speech', args);
    const f = await verify('worker.during_program', subs);
    expect(f.byStatus).toEqual({ succeeded: 2 });
    expect((await steps(subs)).some((s) => s.attempts === 2)).toBe(true);
  }, 60_000);

  it('after a provider request, before its reference is recorded: needs_review, never sent twice', async () => {
    const prompts = [0, 1].map((i) => `fault fox ${tag()} ${i}`);
    const args = prompts.map((prompt) => ({ model: 'replicate/flux-schnell', prompt, count: 1, size: '1024x1024' }));
    const subs = await crashWorker('worker.provider.after_send', 'worker.provider.after_send@1', 'image.generate', args);
    const f = await verify('worker.provider.after_send', subs, true);
    expect(f.byStatus.needs_review).toBeGreaterThanOrEqual(1);
    const review = await cluster
      .db('executions')
      .select('error_code')
      .whereIn(
        'id',
        subs.map((s) => s.executionId!),
      )
      .andWhere({ status: 'needs_review' });
    expect(review.every((r: { error_code: string }) => r.error_code === 'provider_outcome_unknown')).toBe(true);
    for (const prompt of prompts) {
      expect(fake.creates('replicate').filter((r) => JSON.stringify(r.body).includes(prompt)).length).toBeLessThanOrEqual(1);
    }
  }, 60_000);

  it('after settling, before the ack: the redelivered message changes nothing', async () => {
    const subs = await crashWorker('worker.after_settle', 'worker.after_settle@1', 'test.sleep', sleeps(3, 1, 0.1));
    const f = await verify('worker.after_settle', subs);
    expect(f.byStatus).toEqual({ succeeded: 3 });
    expect(f.chargedMicros).toBe(3 * 500);
  }, 60_000);
});
