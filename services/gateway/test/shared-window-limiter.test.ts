import type { Knex } from 'knex';
import { createDb } from '@tes/db';
import { shiftDatabaseClock, startTcpRelay, useTestDatabase } from '@tes/testing';
import { SharedWindowLimiter } from '../src/shared-window-limiter';

/**
 * The leased per-key limit on a real Postgres: never more than the limit across replicas,
 * exact with one replica, few database writes for a busy key, windows that end, and the
 * in-memory stand-in when the database cannot answer.
 */
const { db, database } = useTestDatabase({ poolMax: 6 });

let n = 0;
const freshKey = () => `k${++n}-${Date.now()}`;

it('one replica: exactly the limit is allowed, Remaining counts down by one, with far fewer writes than requests', async () => {
  const limiter = new SharedWindowLimiter(db, { points: 120, windowSeconds: 60, keyPrefix: 'key' });
  const key = freshKey();
  const remaining: number[] = [];
  let allowed = 0;
  for (let i = 0; i < 130; i++) {
    const d = await limiter.consume(key);
    if (d.allowed) allowed += 1;
    remaining.push(d.remaining);
    expect(d.msBeforeNext).toBeGreaterThan(0);
    expect(d.msBeforeNext).toBeLessThanOrEqual(60_000);
  }
  expect(allowed).toBe(120);
  expect(remaining.slice(0, 120)).toEqual(Array.from({ length: 120 }, (_, i) => 119 - i));
  expect(remaining.slice(120).every((r) => r === 0)).toBe(true);
  // leases of 1, 2, 4, 6, 6, …: about 22 writes for 120 requests; the 10 refusals cost one re-check at most
  expect(limiter.leases).toBeLessThan(30);
  const row = await db('rate_limits')
    .where({ key: `key:${key}` })
    .first();
  expect(Number(row.points)).toBeGreaterThanOrEqual(120);
});

it('three replicas, 400 concurrent requests: never more than the limit, and close to it', async () => {
  const replicas = [0, 1, 2].map(() => new SharedWindowLimiter(db, { points: 100, windowSeconds: 60, keyPrefix: 'key' }));
  const key = freshKey();
  const decisions = await Promise.all(Array.from({ length: 400 }, (_, i) => replicas[i % 3]!.consume(key)));
  const allowed = decisions.filter((d) => d.allowed).length;
  expect(allowed).toBeLessThanOrEqual(100);
  // points leased by one replica and not spent are lost to the others: at most
  // (replicas − 1) × (maxLease − 1) = 2 × 4 here
  expect(allowed).toBeGreaterThanOrEqual(100 - 2 * 4);
  // and the last points are still handed out one at a time afterwards, up to the limit exactly
  let more = 0;
  for (let i = 0; i < 30; i++) if ((await replicas[i % 3]!.consume(key)).allowed) more += 1;
  expect(allowed + more).toBeLessThanOrEqual(100);
});

it('concurrent first requests for a key share one lease rather than each writing', async () => {
  const limiter = new SharedWindowLimiter(db, { points: 10_000, windowSeconds: 60, keyPrefix: 'key' });
  const key = freshKey();
  const decisions = await Promise.all(Array.from({ length: 64 }, () => limiter.consume(key)));
  expect(decisions.every((d) => d.allowed)).toBe(true);
  // leases 1, 2, 4, 8, 16, 32, 64 at most, never one per request
  expect(limiter.leases).toBeLessThanOrEqual(7);
});

it('a window that ends starts afresh; an exhausted key is re-checked against the shared counter after the re-check interval', async () => {
  let clock = Date.now();
  const limiter = new SharedWindowLimiter(db, { points: 5, windowSeconds: 60, keyPrefix: 'key', recheckExhaustedMs: 1000, now: () => clock });
  const key = freshKey();
  for (let i = 0; i < 5; i++) expect((await limiter.consume(key)).allowed).toBe(true);
  const refused = await limiter.consume(key);
  expect(refused).toMatchObject({ allowed: false, remaining: 0 });
  const writes = limiter.leases;
  // refusals inside the re-check interval cost no database round trip
  for (let i = 0; i < 20; i++) expect((await limiter.consume(key)).allowed).toBe(false);
  expect(limiter.leases).toBe(writes);

  // an operator resets the counter: seen after the re-check interval, not before
  await db('rate_limits')
    .where({ key: `key:${key}` })
    .update({ points: 0 });
  clock += 500;
  expect((await limiter.consume(key)).allowed).toBe(false);
  clock += 600;
  expect((await limiter.consume(key)).allowed).toBe(true);

  // the window ends (by the database's clock, which the window is kept in): all five points
  // again, Remaining from the top
  clock += 61_000;
  await shiftDatabaseClock(db, '61 seconds');
  try {
    const first = await limiter.consume(key);
    expect(first).toMatchObject({ allowed: true, remaining: 4 });
    for (let i = 0; i < 4; i++) expect((await limiter.consume(key)).allowed).toBe(true);
    expect((await limiter.consume(key)).allowed).toBe(false);
  } finally {
    await shiftDatabaseClock(db, '0');
  }
});

it("the window is the database's: a replica whose clock is off neither starts a new one early nor holds one open", async () => {
  const onTime = new SharedWindowLimiter(db, { points: 3, windowSeconds: 60, keyPrefix: 'key' });
  const ahead = new SharedWindowLimiter(db, { points: 3, windowSeconds: 60, keyPrefix: 'key', now: () => Date.now() + 3_600_000 });
  const key = freshKey();
  for (let i = 0; i < 3; i++) expect((await onTime.consume(key)).allowed).toBe(true);
  // an hour ahead, this replica's clock says the window ended long ago: the database's says not
  const refused = await ahead.consume(key);
  expect(refused).toMatchObject({ allowed: false, remaining: 0 });
  expect(refused.msBeforeNext).toBeGreaterThan(0);
  expect(refused.msBeforeNext).toBeLessThanOrEqual(60_000);
  // nor does a replica whose clock runs behind hold the window open past its end
  const behind = new SharedWindowLimiter(db, { points: 3, windowSeconds: 60, keyPrefix: 'key', now: () => Date.now() - 3_600_000 });
  await shiftDatabaseClock(db, '61 seconds');
  try {
    expect(await behind.consume(key)).toMatchObject({ allowed: true, remaining: 2 });
  } finally {
    await shiftDatabaseClock(db, '0');
  }
});

it('a failing store is asked once: the requests waiting on its lease, and the next ones for a while, use the stand-in', async () => {
  // a database that refuses connections: every lease attempt fails
  const down = createDb({ url: 'postgres://postgres@127.0.0.1:1/none', poolMax: 1 });
  const errors: unknown[] = [];
  try {
    const limiter = new SharedWindowLimiter(down, { points: 100, windowSeconds: 60, keyPrefix: 'key', onStoreError: (e) => errors.push(e) });
    const key = freshKey();
    const started = Date.now();
    const decisions = await Promise.all(Array.from({ length: 20 }, () => limiter.consume(key)));
    expect(decisions.every((d) => d.allowed)).toBe(true);
    expect(limiter.leases).toBe(1); // not one attempt per waiting request
    expect(errors).toHaveLength(1);
    for (let i = 0; i < 5; i++) expect((await limiter.consume(key)).allowed).toBe(true);
    expect(limiter.leases).toBe(1);
    expect(Date.now() - started).toBeLessThan(5_000);
  } finally {
    await down.destroy();
  }
});

it('when the database cannot answer, an in-memory limiter with the same policy decides', async () => {
  const down = createDb({ url: 'postgres://postgres@127.0.0.1:1/none', poolMax: 1 });
  try {
    const limiter = new SharedWindowLimiter(down, { points: 3, windowSeconds: 60, keyPrefix: 'key' });
    const key = freshKey();
    const allowed: boolean[] = [];
    for (let i = 0; i < 5; i++) allowed.push((await limiter.consume(key)).allowed);
    expect(allowed).toEqual([true, true, true, false, false]);
  } finally {
    await down.destroy();
  }
});

it('while the shared counter is unreachable a used-up key stays refused, other keys use the stand-in, and a probe brings the counter back', async () => {
  const relay = await startTcpRelay(database.url, 5432);
  const viaRelay = createDb({ url: relay.url, poolMax: 2 });
  const events: string[] = [];
  let clock = Date.now();
  try {
    const limiter = new SharedWindowLimiter(viaRelay, {
      points: 3,
      windowSeconds: 60,
      keyPrefix: 'key',
      storeRetryMs: 1000,
      now: () => clock,
      onStoreError: () => events.push('down'),
      onStoreRecovered: () => events.push('up'),
    });
    const used = freshKey();
    for (let i = 0; i < 3; i++) expect((await limiter.consume(used)).allowed).toBe(true);
    expect((await limiter.consume(used)).allowed).toBe(false);
    await relay.cut();
    clock += 1500; // past the exhausted key's re-check interval
    const other = freshKey();
    expect((await limiter.consume(other)).allowed).toBe(true); // the stand-in (the lease failed)
    expect(events).toEqual(['down']);
    for (let i = 0; i < 5; i++) expect((await limiter.consume(used)).allowed).toBe(false);
    const leasesWhileDown = limiter.leases;
    expect((await limiter.consume(other)).allowed).toBe(true);
    expect(limiter.leases).toBe(leasesWhileDown); // no probe before storeRetryMs
    await relay.restore();
    clock += 1100;
    await viaRelay.destroy(); // drop the pool's dead connections; the next lease reconnects
    const fresh = createDb({ url: relay.url, poolMax: 2 });
    (limiter as unknown as { db: Knex }).db = fresh;
    try {
      expect((await limiter.consume(freshKey())).allowed).toBe(true);
      expect(events).toEqual(['down', 'up']);
    } finally {
      await fresh.destroy();
    }
  } finally {
    await viaRelay.destroy().catch(() => undefined);
    await relay.cut().catch(() => undefined);
  }
});

it('while the counter is unreachable, a key this replica holds a window for gets no more than the counter had left', async () => {
  const relay = await startTcpRelay(database.url, 5432);
  const viaRelay = createDb({ url: relay.url, poolMax: 2 });
  try {
    const limiter = new SharedWindowLimiter(viaRelay, { points: 10, windowSeconds: 60, keyPrefix: 'key', maxLease: 1 });
    const key = freshKey();
    for (let i = 0; i < 7; i++) expect((await limiter.consume(key)).allowed).toBe(true);
    await relay.cut();
    const allowed: boolean[] = [];
    for (let i = 0; i < 6; i++) allowed.push((await limiter.consume(key)).allowed);
    // the in-memory stand-in alone would have granted 6 more (a fresh 10 per replica): fail closed at the limit
    expect(allowed).toEqual([true, true, true, false, false, false]);
  } finally {
    await viaRelay.destroy().catch(() => undefined);
    await relay.cut().catch(() => undefined);
  }
});

it('an overloaded database (no connection free in time) refuses the request with 503 instead of admitting it unchecked', async () => {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const knex = require('knex') as (c: Knex.Config) => Knex;
  const small = knex({ client: 'pg', connection: { connectionString: database.url }, pool: { min: 0, max: 1 }, acquireConnectionTimeout: 300 });
  const errors: unknown[] = [];
  try {
    const limiter = new SharedWindowLimiter(small, { points: 100, windowSeconds: 60, keyPrefix: 'key', onStoreError: (e) => errors.push(e) });
    const key = freshKey();
    const trx = await small.transaction(); // holds the only connection: every lease waits, then times out
    try {
      await expect(limiter.consume(key)).rejects.toMatchObject({ code: 'service_unavailable' });
      await expect(limiter.consume(freshKey())).rejects.toMatchObject({ code: 'service_unavailable' });
    } finally {
      await trx.commit();
    }
    expect(errors).toHaveLength(0); // not taken for "unreachable": no stand-in took over
    expect((await limiter.consume(key)).allowed).toBe(true);
  } finally {
    await small.destroy();
  }
});
