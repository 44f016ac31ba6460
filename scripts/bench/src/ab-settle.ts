/**
 * `node scripts/bench/dist/ab-settle.js [rounds]` (after `npm run bench` or `tsc -b scripts/bench`):
 * the A/B of issue #14's B5 change, interleaved (A B, B A, …) in one process on a scratch database,
 * so a busy machine slows both sides alike. The end of an execution's last step as the worker did
 * it before (finishStep, then settleExecution: two statements, two commits) against what it does
 * now (finishLastStepAndSettle: one statement, one commit), for `CONCURRENCY` executions at once.
 * Prints one JSON line: wall ms per batch for each.
 */
import { newId } from '@tes/core';
import { claimExecution, createDb, finishLastStepAndSettle, finishStep, publishPrices, settleExecution, startStep, submitExecution, type Db } from '@tes/db';
import { createTestDatabase, seedProject } from '@tes/testing';

const CONCURRENCY = 8;

async function running(db: Db, p: { projectId: string; keyId: string }, priceVersion: string): Promise<string> {
  const id = newId('exe');
  await submitExecution(db, {
    id,
    projectId: p.projectId,
    apiKeyId: p.keyId,
    tool: 'test.sleep',
    model: 'sleep',
    category: 'test',
    arguments: {},
    priceVersion,
    totalSteps: 1,
    reservedMicros: 10,
    idempotencyKey: id,
    requestDigest: 'd',
    dispatchDeadlineMs: 60_000,
  });
  if (!(await claimExecution(db, id, 'w', 30_000))) throw new Error('claim');
  if ((await startStep(db, { executionId: id, projectId: p.projectId, index: 0, name: 'sleep', owner: 'w:1' })) !== 'started') throw new Error('start');
  return id;
}

async function end(db: Db, mode: 'two' | 'one', projectId: string, id: string): Promise<void> {
  const artifact = {
    id: newId('art'),
    format: 'txt',
    mimeType: 'text/plain',
    sizeBytes: 3,
    sha256: 'ab'.repeat(32),
    storageKey: `k/${id}.txt`,
    fileName: 'x.txt',
    expiresAt: new Date(Date.now() + 86_400_000),
  };
  const step = {
    executionId: id,
    projectId,
    index: 0,
    owner: 'w:1', // the lease of the execution's first claim
    status: 'succeeded' as const,
    costMicros: 1,
    checkpoint: { facts: {} },
    artifacts: [artifact],
  };
  const settle = {
    executionId: id,
    projectId,
    status: 'succeeded' as const,
    chargedMicros: 1,
    from: ['running' as const],
    leaseOwner: 'w:1',
    output: { artifacts: [] },
  };
  if (mode === 'two') {
    if (!(await finishStep(db, step)) || !(await settleExecution(db, settle))) throw new Error('fenced');
  } else if (!(await finishLastStepAndSettle(db, step, settle))) throw new Error('fenced');
}

async function main(): Promise<void> {
  const rounds = Number(process.argv[2] ?? 30);
  const database = await createTestDatabase();
  const db = createDb({ url: database.url, poolMax: CONCURRENCY });
  try {
    const { priceVersion } = await publishPrices(db, { 'test.sleep': 1 });
    const projects: { projectId: string; keyId: string }[] = [];
    for (let i = 0; i < CONCURRENCY; i++) projects.push(await seedProject(db, { creditMicros: 1_000_000_000 }));
    const ms = { two: 0, one: 0 };
    for (let r = 0; r < rounds; r++) {
      for (const mode of r % 2 ? (['two', 'one'] as const) : (['one', 'two'] as const)) {
        const ids = await Promise.all(projects.map((p) => running(db, p, priceVersion)));
        const t0 = performance.now();
        await Promise.all(ids.map((id, i) => end(db, mode, projects[i]!.projectId, id)));
        ms[mode] += performance.now() - t0;
      }
    }
    const per = (v: number) => Math.round((v / rounds) * 100) / 100;
    process.stdout.write(
      `${JSON.stringify({ rounds, concurrency: CONCURRENCY, msPerBatch: { finishStepThenSettle: per(ms.two), finishLastStepAndSettle: per(ms.one) } })}\n`,
    );
  } finally {
    await db.destroy();
    await database.drop();
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
