import { newId } from '@tes/core';
import { claimExecution, getExecutionWithSteps, publishPrices, settleExecution, submitExecution } from '@tes/db';
import { createNullLogger } from '@tes/observability';
import { seedProject, useTestDatabase } from '@tes/testing';
import { ChangeHub } from '../src/push/change-hub';

/**
 * Without notifications (a LISTEN connection that cannot connect stands for one that is down),
 * the hub's re-sync still brings every change: it reads the versions of what it watches and
 * reads in full only what changed.
 */
const { db } = useTestDatabase({ poolMax: 4 });

it('re-syncs by version when no notification comes, and reads only what changed', async () => {
  const p = await seedProject(db, { creditMicros: 100_000 });
  const { priceVersion } = await publishPrices(db, { hub: 1 });
  const ids: string[] = [];
  for (let i = 0; i < 3; i++) {
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
      reservedMicros: 100,
      idempotencyKey: `hub-${id}`,
      requestDigest: 'd',
      dispatchDeadlineMs: 60_000,
    });
    ids.push(id);
  }
  let reads = 0;
  const counting = new Proxy(db, {
    apply: (target, self, args: unknown[]) => Reflect.apply(target as unknown as (...a: unknown[]) => unknown, self, args),
    get: (target, prop, receiver) => {
      if (prop === 'raw') reads += 1;
      return Reflect.get(target, prop, receiver) as unknown;
    },
  });
  const hub = new ChangeHub({ db: counting, databaseUrl: 'postgres://nobody@127.0.0.1:1/none', logger: createNullLogger(), resyncMs: 100 });
  void hub.start();
  try {
    const seen = new Map<string, string[]>();
    for (const id of ids) hub.watch(p.projectId, id, (v) => seen.set(id, [...(seen.get(id) ?? []), v.execution.status]));
    for (const id of ids) hub.refresh(id);
    // each one's first read delivered (a fixed 400 ms was too short on a loaded CI machine)
    const first = Date.now() + 5_000;
    while (ids.some((id) => !seen.has(id)) && Date.now() < first) await new Promise((r) => setTimeout(r, 25));
    await new Promise((r) => setTimeout(r, 200));
    const before = reads;
    await new Promise((r) => setTimeout(r, 500)); // several re-syncs, nothing changed: versions only
    expect(reads - before).toBeLessThanOrEqual(6);
    expect([...seen.values()].every((s) => s.length === 1)).toBe(true);

    await claimExecution(db, ids[1]!, 'w', 30_000);
    await settleExecution(db, { executionId: ids[1]!, projectId: p.projectId, status: 'succeeded', chargedMicros: 1, from: ['running'], leaseOwner: 'w:1' });
    const until = Date.now() + 3_000;
    while (seen.get(ids[1]!)!.at(-1) !== 'succeeded' && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
    expect(seen.get(ids[1]!)!.at(-1)).toBe('succeeded');
    expect(seen.get(ids[0]!)).toEqual(['queued']);
    expect(seen.get(ids[2]!)).toEqual(['queued']);
    const view = await getExecutionWithSteps(db, p.projectId, ids[1]!);
    expect(view!.execution.status).toBe('succeeded');
  } finally {
    await hub.stop();
  }
});
