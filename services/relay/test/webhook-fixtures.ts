import type { Knex } from 'knex';
import { newId } from '@tes/core';
import { claimExecution, publishPrices, settleExecution, submitExecution } from '@tes/db';

/** An execution of `projectId` that ran and ended `status`: its statement writes the webhook deliveries. */
export async function endedExecution(db: Knex, projectId: string, keyId: string, status: 'succeeded' | 'failed' = 'succeeded'): Promise<string> {
  const { priceVersion } = await publishPrices(db, { hooks: 1 });
  const id = newId('exe');
  await submitExecution(db, {
    id,
    projectId,
    apiKeyId: keyId,
    tool: 'test.sleep',
    model: 'sleep',
    category: 'test',
    arguments: { seconds: 0 },
    priceVersion,
    totalSteps: 1,
    reservedMicros: 100,
    idempotencyKey: `k-${id}`,
    requestDigest: 'd',
    dispatchDeadlineMs: 60_000,
  });
  await claimExecution(db, id, 'w', 30_000);
  await settleExecution(db, {
    executionId: id,
    projectId,
    status,
    chargedMicros: status === 'succeeded' ? 40 : 0,
    from: ['running'],
    leaseOwner: 'w:1',
    output: { ok: true },
  });
  return id;
}

export async function until(what: string, check: () => boolean | Promise<boolean>, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}
