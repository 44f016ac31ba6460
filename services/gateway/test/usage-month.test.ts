import type { Request, Response } from 'express';
import { newId } from '@tes/core';
import { auditLedger, claimExecution, publishPrices, settleExecution, submitExecution } from '@tes/db';
import { seedProject, shiftDatabaseClock, useTestDatabase } from '@tes/testing';
import type { GatewayDeps } from '../src/context';
import { getUsageRoute } from '../src/routes/get-usage';

/**
 * GET /tools/usage reads its month from the database's clock, the one the counters and the
 * cap are written with (tes_month()): with the database 40 days ahead of the gateway, the
 * charges settled "now" are in the database's month and usage shows them, with that month as
 * its period.
 */
const { db } = useTestDatabase({ poolMax: 2 });

it("shows the charges of the database's month, not of the gateway's", async () => {
  await shiftDatabaseClock(db, '40 days');
  const p = await seedProject(db, { creditMicros: 10_000, monthlyCapMicros: 5_000 });
  const { priceVersion } = await publishPrices(db, { usage: 1 });
  const id = newId('exe');
  await submitExecution(db, {
    id,
    projectId: p.projectId,
    apiKeyId: p.keyId,
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
  const claimed = await claimExecution(db, id, 'w', 30_000);
  await settleExecution(db, {
    executionId: id,
    projectId: p.projectId,
    status: 'succeeded',
    chargedMicros: 40,
    from: ['running'],
    leaseOwner: claimed!.lease, // the claim's fence
    output: {},
  });

  let sent: unknown;
  const res = { json: (body: unknown) => (sent = body) } as unknown as Response;
  const auth = {
    keyId: p.keyId,
    lookupId: 'unused',
    keyName: 'k',
    projectId: p.projectId,
    organizationId: p.organizationId,
    scopes: ['usage:read'],
    role: 'ADMIN',
  } as const;
  await getUsageRoute({ db } as unknown as GatewayDeps).handle({ req: {} as Request, res, auth, body: undefined, query: {} });

  const { rows } = await db.raw<{ rows: { start: Date; end: Date }[] }>(
    `SELECT tes_month()::timestamp AT TIME ZONE 'UTC' AS start, (tes_month() + interval '1 month') AT TIME ZONE 'UTC' AS "end"`,
  );
  const dbMonth = rows[0]!;
  expect(dbMonth.start.getTime()).toBeGreaterThan(Date.now()); // the database's month is one the gateway's clock has not reached
  expect(sent).toMatchObject({
    data: {
      period: { start: dbMonth.start.toISOString(), end: dbMonth.end.toISOString() },
      executionCount: 1,
      chargedMicros: 40,
      monthlyCapMicros: 5_000,
      remainingCapMicros: 5_000 - 40,
    },
  });
  expect((await auditLedger(db)).ok).toBe(true);
});
