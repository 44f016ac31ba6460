import type { Request, Response } from 'express';
import { isAppError } from '@tes/core';
import { databaseTime } from '@tes/db';
import { seedProject, shiftDatabaseClock, useTestDatabase } from '@tes/testing';
import { authenticate } from '../src/auth';
import { KeyCache } from '../src/key-cache';
import { RequestLimits } from '../src/rate-limit';

/**
 * An API key's expiry is decided by the database's clock, not by the gateway's: the moment an
 * operator set is the same moment for every gateway, whatever its own clock says. Here the
 * database's clock is moved against the gateway's (this process's).
 */
const { db } = useTestDatabase({ poolMax: 2 });

async function outcome(secret: string): Promise<string> {
  const req = { get: () => `Bearer ${secret}`, ip: '127.0.0.1' } as unknown as Request;
  const res = { setHeader: () => undefined } as unknown as Response;
  try {
    await authenticate(new KeyCache(db, 0), new RequestLimits(db, 100), req, res);
    return 'ok';
  } catch (err) {
    if (isAppError(err)) return err.code;
    throw err;
  }
}

it("refuses a key as expired by the database's clock, whatever the gateway's says", async () => {
  // the database two hours behind: a key with an hour left by it has expired by the gateway's clock
  await shiftDatabaseClock(db, '-2 hours');
  const live = await seedProject(db, { expiresAt: await databaseTime(db, 3_600_000) });
  const dead = await seedProject(db, { expiresAt: await databaseTime(db, -60_000) });
  expect(await outcome(live.secret)).toBe('ok');
  expect(await outcome(dead.secret)).toBe('platform_api_key_expired');

  // the database two hours ahead: a key expired by it has two hours left by the gateway's clock
  await shiftDatabaseClock(db, '2 hours');
  const expired = await seedProject(db, { expiresAt: await databaseTime(db, -60_000) });
  expect(await outcome(expired.secret)).toBe('platform_api_key_expired');
});
