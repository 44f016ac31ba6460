import type { Knex } from 'knex';
import { addKey, seedProject } from '@tes/testing';
import type { FaultClient, Submission } from './client';
import { sleep } from './cluster';
import { TERMINAL, waitForEnd } from './invariants';

/**
 * The soak's traffic: test.sleep submits from several projects and keys, each resent (same
 * key, same body) until answered, as the client of client.ts does.
 *  - Workload: the projects, keys and a fixed mix of arguments (seconds 0..0.2 × 1..3 steps,
 *    mean 0.2 s of sleep per execution), quoted once per project so a submit costs one request.
 *  - probeCapacity: closed loop, K executions open at a time, K doubled per stage until the
 *    rate of ended executions stops growing (two stages in a row without +10 %: one noisy
 *    stage on the shared cores does not end the ramp); the best stage is the capacity.
 *  - SteadyLoad: open loop at a fixed rate (it does not slow down when the service does:
 *    a backlog shows up as queue depth and latency, which is what the soak watches).
 */
const SECONDS = [0, 0.05, 0.1, 0.15, 0.2];
const STEPS = [1, 2, 3];
const COST_MICROS_PER_STEP = 100;

export class Workload {
  /** Credit given to each project (for the balance invariants). */
  readonly credits = new Map<string, number>();
  private readonly keys: { projectId: string; secret: string }[] = [];
  private readonly bodies = new Map<string, Submission['body'][]>();
  private n = 0;

  private constructor(readonly prefix: string) {}

  static async create(db: Knex, client: FaultClient, o: { projects: number; keysPerProject: number; creditMicros: number }): Promise<Workload> {
    const w = new Workload(Date.now().toString(36));
    for (let p = 0; p < o.projects; p++) {
      const seeded = await seedProject(db, { creditMicros: o.creditMicros });
      w.credits.set(seeded.projectId, o.creditMicros);
      w.keys.push({ projectId: seeded.projectId, secret: seeded.secret });
      for (let k = 1; k < o.keysPerProject; k++) w.keys.push({ projectId: seeded.projectId, secret: (await addKey(db, seeded.projectId)).secret });
      const bodies: Submission['body'][] = [];
      for (const seconds of SECONDS) {
        for (const steps of STEPS) {
          bodies.push(
            (await client.prepare(seeded.secret, seeded.projectId, 'quote', 'test.sleep', { seconds, steps, costMicrosPerStep: COST_MICROS_PER_STEP })).body,
          );
        }
      }
      w.bodies.set(seeded.projectId, bodies);
    }
    return w;
  }

  /** The next submission: keys round-robin, argument mix cycling (deterministic, no randomness to explain). */
  next(tag: string): Submission {
    const i = this.n++;
    const key = this.keys[i % this.keys.length]!;
    const bodies = this.bodies.get(key.projectId)!;
    const body = bodies[Math.floor(i / this.keys.length) % bodies.length]!;
    return { key: `${tag}-${this.prefix}-${i}`, secret: key.secret, projectId: key.projectId, tool: 'test.sleep', body, attempts: [] };
  }
}

export interface Answered {
  /** When the definite answer arrived (ms epoch). */
  at: number;
  /** From the first send to the definite answer, resends included. */
  ms: number;
  status: number | undefined;
}

/** Sends until answered and records the client-side latency of the whole exchange. */
async function submitTimed(client: FaultClient, s: Submission, out: Answered[]): Promise<void> {
  const t = Date.now();
  const a = await client.sendUntilAnswered(s, 120_000, 300);
  out.push({ at: Date.now(), ms: Date.now() - t, status: a.status });
}

export interface ProbeStage {
  outstanding: number;
  endedPerSecond: number;
}

/**
 * Capacity: K executions kept open (submitted and not ended); each stage runs `stageSeconds`
 * and counts the executions that ended after its first second. K doubles until two stages
 * in a row beat the best by less than 10 %. Every probe submission is returned, so the
 * final audit covers it.
 */
export async function probeCapacity(
  db: Knex,
  client: FaultClient,
  workload: Workload,
  o: { ks: number[]; stageSeconds: number; log: (line: string) => void },
): Promise<{ perSecond: number; stages: ProbeStage[]; subs: Submission[]; answered: Answered[] }> {
  const subs: Submission[] = [];
  const answered: Answered[] = [];
  const sending = new Set<Promise<void>>();
  const open = new Set<string>();
  const endedAt: number[] = [];
  const stages: ProbeStage[] = [];
  let best = 0;
  let flat = 0;
  for (const k of o.ks) {
    const start = Date.now();
    const end = start + o.stageSeconds * 1_000;
    while (Date.now() < end) {
      while (open.size + sending.size < k) {
        const s = workload.next('probe');
        subs.push(s);
        const p: Promise<void> = submitTimed(client, s, answered).then(() => {
          sending.delete(p);
          if (s.executionId) open.add(s.executionId);
        });
        sending.add(p);
      }
      if (open.size > 0) {
        const ended: { id: string }[] = await db('executions')
          .select('id')
          .whereIn('id', [...open])
          .whereIn('status', [...TERMINAL, 'needs_review']);
        for (const r of ended) {
          open.delete(r.id);
          endedAt.push(Date.now());
        }
      }
      await sleep(50);
    }
    const counted = endedAt.filter((t) => t >= start + 1_000 && t <= end).length;
    const rate = counted / (o.stageSeconds - 1);
    stages.push({ outstanding: k, endedPerSecond: Math.round(rate * 10) / 10 });
    o.log(`probe: ${k} open → ${rate.toFixed(1)} executions ended/s`);
    flat = rate < best * 1.1 ? flat + 1 : 0;
    best = Math.max(best, rate);
    if (flat === 2) break;
  }
  await Promise.all(sending);
  await waitForEnd(db, subs, false, 300_000);
  return { perSecond: Math.max(...stages.map((s) => s.endedPerSecond)), stages, subs, answered };
}

/** Open-loop load at a fixed rate; every submission and its answer latency are kept. */
export class SteadyLoad {
  readonly subs: Submission[] = [];
  readonly answered: Answered[] = [];
  private readonly pending = new Set<Promise<void>>();
  private timer: NodeJS.Timeout | undefined;
  private startedAt = 0;

  constructor(
    private readonly client: FaultClient,
    private readonly workload: Workload,
    readonly ratePerSecond: number,
  ) {}

  start(): void {
    this.startedAt = Date.now();
    // A 100 ms tick sends whatever is due: the rate holds even when the event loop lags.
    this.timer = setInterval(() => {
      const due = Math.floor(((Date.now() - this.startedAt) / 1_000) * this.ratePerSecond);
      while (this.subs.length < due) this.submit();
    }, 100);
  }

  private submit(): void {
    const s = this.workload.next('soak');
    this.subs.push(s);
    const p: Promise<void> = submitTimed(this.client, s, this.answered).finally(() => this.pending.delete(p));
    this.pending.add(p);
  }

  /** Submits still waiting for an answer. */
  get inFlight(): number {
    return this.pending.size;
  }

  /** Stops sending and waits until every submission has its answer. */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    while (this.pending.size > 0) await Promise.all([...this.pending]);
  }
}
