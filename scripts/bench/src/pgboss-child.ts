/**
 * The B5 baseline, one role per process (as gateway and worker are separate processes):
 *   send: BENCH_CONCURRENCY loops each `boss.send()` one job after another for BENCH_SECONDS,
 *         while fewer than BENCH_WINDOW jobs are unfinished (window.ts, as our submits);
 *   work: BENCH_CONCURRENCY loops each `fetch()` one job, "work" (nothing, as test.sleep 0 s)
 *         and `complete()` it, until SIGTERM.
 * The work side uses fetch/complete loops rather than `boss.work()`, whose worker waits its
 * polling interval (≥ 0.5 s) after every fetch: that would cap pg-boss at 2 × batch jobs/s and
 * make a meaninglessly weak baseline. An empty fetch waits 5 ms before the next.
 * Prints one JSON line {"sent":n} or {"completed":n} on stdout when done.
 */
import PgBoss from 'pg-boss';
import { OutstandingGate } from './window';

const role = process.argv[2];
const url = process.env.DATABASE_URL!;
const queue = process.env.BENCH_QUEUE!;
const concurrency = Number(process.env.BENCH_CONCURRENCY);
const seconds = Number(process.env.BENCH_SECONDS ?? 0);
/** Count bound of the send loop (far above what this machine does in a run). */
const MAX_SENT = 1_000_000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function main(): Promise<void> {
  const boss = new PgBoss({
    connectionString: url,
    schema: 'pgboss',
    max: concurrency + 2,
    application_name: `tes-bench-pgboss-${role}`,
    supervise: false,
    schedule: false,
    migrate: role === 'setup',
  });
  boss.on('error', (err) => process.stderr.write(`pg-boss: ${err.message}\n`));
  await boss.start();
  let stopping = false;
  process.once('SIGTERM', () => (stopping = true));

  if (role === 'setup') {
    await boss.createQueue(queue);
    process.stdout.write('{"ready":true}\n');
  } else if (role === 'send') {
    let sent = 0;
    const until = Date.now() + seconds * 1000;
    const gate = new OutstandingGate(
      url,
      `SELECT count(*) AS n FROM pgboss.job WHERE name = $1 AND state = 'completed'`,
      [queue],
      Number(process.env.BENCH_WINDOW ?? 16),
    );
    await gate.start();
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (!stopping && Date.now() < until && sent < MAX_SENT) {
          await gate.take();
          await boss.send(queue, { executionId: 'x' });
          sent += 1;
        }
      }),
    );
    await gate.stop();
    process.stdout.write(`${JSON.stringify({ sent })}\n`);
  } else if (role === 'work') {
    let completed = 0;
    // bounded: the harness stops this with SIGTERM; the deadline is a backstop
    const until = Date.now() + (seconds || 600) * 1000;
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (!stopping && Date.now() < until) {
          const jobs = await boss.fetch<{ executionId: string }>(queue);
          const job = jobs[0];
          if (!job) {
            await sleep(5);
            continue;
          }
          await boss.complete(queue, job.id);
          completed += 1;
        }
      }),
    );
    process.stdout.write(`${JSON.stringify({ completed })}\n`);
  } else {
    throw new Error('usage: pgboss-child.js setup|send|work');
  }
  await boss.stop({ graceful: false, wait: true });
}

main().catch((err: unknown) => {
  process.stderr.write(`pgboss-child ${role}: ${(err as Error).stack}\n`);
  process.exit(1);
});
