import { createDb, revokeApiKey } from '@tes/db';
import { addKey, seedProject, startTcpRelay, useTestDatabase } from '@tes/testing';
import { KeyCache } from '../src/key-cache';

/**
 * The key cache and a revocation racing a read (found in review): a read that started before
 * the revocation carries the row as it was, and its answer may arrive after the revocation's
 * notification made the cache forget the key. It must not be cached then, or the revoked key
 * would be admitted for AUTH_CACHE_TTL_MS. Real Postgres; the read's answer is held back by a
 * TCP relay that stops forwarding the server's bytes.
 */
const { db, database } = useTestDatabase({ poolMax: 2 });

it('a row read before a revocation is not cached when its answer arrives after the revocation was announced', async () => {
  const p = await seedProject(db);
  const key = await addKey(db, p.projectId);
  const lookupId = key.secret.slice(4, 12);
  const relay = await startTcpRelay(database.url, 5432);
  const viaRelay = createDb({ url: relay.url, poolMax: 1 });
  try {
    await viaRelay.raw('select 1'); // the pool's connection is open before the answers are held
    const cache = new KeyCache(viaRelay, 5_000);
    cache.listening = true;
    relay.holdAnswers(true);
    const inFlight = cache.find(lookupId); // read (and answered by Postgres) before the revocation
    await new Promise((r) => setTimeout(r, 200));
    await revokeApiKey(db, key.id);
    cache.forget(lookupId); // the revocation's notification
    relay.holdAnswers(false);
    expect((await inFlight)?.revokedAt).toBeNull(); // the stale answer itself
    expect((await cache.find(lookupId))?.revokedAt).not.toBeNull(); // but it was not cached
  } finally {
    await viaRelay.destroy();
    await relay.close();
  }
});
