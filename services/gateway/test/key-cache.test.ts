import net from 'node:net';
import type { Knex } from 'knex';
import { createDb, revokeApiKey } from '@tes/db';
import { addKey, createTestDatabase, seedProject, type TestDatabase } from '@tes/testing';
import { KeyCache } from '../src/auth';

/**
 * The key cache and a revocation racing a read (found in review): a read that started before
 * the revocation carries the row as it was, and its answer may arrive after the revocation's
 * notification made the cache forget the key. It must not be cached then, or the revoked key
 * would be admitted for AUTH_CACHE_TTL_MS. Real Postgres; the read's answer is held back by a
 * TCP relay that stops forwarding the server's bytes.
 */
let database: TestDatabase;
let db: Knex;

beforeAll(async () => {
  database = await createTestDatabase();
  db = createDb({ url: database.url, poolMax: 2 });
});
afterAll(async () => {
  await db?.destroy();
  await database?.drop();
});

async function answerHoldingRelay(): Promise<{ url: string; hold: (on: boolean) => void; close: () => Promise<void> }> {
  const target = new URL(database.url);
  const upstreams = new Set<net.Socket>();
  const clients = new Set<net.Socket>();
  let held = false;
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(target.port || 5432), target.hostname);
    upstreams.add(upstream);
    clients.add(client);
    for (const s of [client, upstream]) s.on('error', () => undefined);
    client.on('close', () => { clients.delete(client); upstream.destroy(); });
    upstream.on('close', () => { upstreams.delete(upstream); client.destroy(); });
    client.pipe(upstream);
    upstream.pipe(client);
    if (held) upstream.pause();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const url = new URL(database.url);
  url.hostname = '127.0.0.1';
  url.port = String((server.address() as net.AddressInfo).port);
  return {
    url: url.toString(),
    hold: (on) => {
      held = on;
      for (const u of upstreams) if (on) u.pause(); else u.resume();
    },
    close: () => new Promise<void>((r) => { for (const c of clients) c.destroy(); server.close(() => r()); }),
  };
}

it('a row read before a revocation is not cached when its answer arrives after the revocation was announced', async () => {
  const p = await seedProject(db);
  const key = await addKey(db, p.projectId);
  const lookupId = key.secret.slice(4, 12);
  const relay = await answerHoldingRelay();
  const viaRelay = createDb({ url: relay.url, poolMax: 1 });
  try {
    await viaRelay.raw('select 1'); // the pool's connection is open before the answers are held
    const cache = new KeyCache(viaRelay, 5_000);
    cache.listening = true;
    relay.hold(true);
    const inFlight = cache.find(lookupId); // read (and answered by Postgres) before the revocation
    await new Promise((r) => setTimeout(r, 200));
    await revokeApiKey(db, key.id);
    cache.forget(lookupId); // the revocation's notification
    relay.hold(false);
    expect((await inFlight)?.revokedAt).toBeNull(); // the stale answer itself
    expect((await cache.find(lookupId))?.revokedAt).not.toBeNull(); // but it was not cached
  } finally {
    await viaRelay.destroy();
    await relay.close();
  }
});
