import crypto from 'node:crypto';
import http from 'node:http';
import { digestsEqual, digestSecret, parseKeySecret } from '@tes/core';
import { addKey } from '@tes/testing';
import * as apiKeys from '../../libs/core/src/api-keys';
import * as accounts from '../../libs/db/src/accounts';
import { AUTH_FAILURES_PER_MINUTE } from '../../services/gateway/src/rate-limit';
import { bearer, startStack, type TestStack } from '../stack';

/**
 * API key comparison is constant-time. The real guarantee is structural: the presented
 * secret is hashed (SHA-256) and the 32-byte digest is compared with the stored one by
 * crypto.timingSafeEqual, so neither the position of a wrong character nor an unknown lookup
 * id changes the work done. These tests watch that happen inside the running gateway (spies
 * that call through; nothing is replaced), then add a statistical smoke check over HTTP.
 *
 * Whether a lookup id exists must not show either: an unknown id and a known id with a wrong
 * secret do the same work (a cached lookup, one digest, one comparison of 32-byte digests).
 * The key cache keeps AUTH_CACHE_TTL_MS's production default here (5 s), so it is on the
 * path of every measured request as it would be in production.
 */
let stack: TestStack;
let key: { keyId: string; secret: string; projectId: string };
/**
 * A key no request presents before the lookup-count test. Its creation notifies the gateway (a
 * cached "unknown" must go), and a notification that arrived after the test's first request
 * would evict what that request cached: a second lookup that is the notification's, not the
 * key's (seen on a loaded CI machine). So the gateway is seen to have taken it: a cached key
 * revoked after it stops working once the gateway takes the revocation, which comes after.
 */
let unseen: { secret: string };

beforeAll(async () => {
  stack = await startStack({ worker: false, relay: false, env: { AUTH_CACHE_TTL_MS: '5000' } });
  key = await stack.seed({ scopes: ['project:read'] });
  const marker = await addKey(stack.db, key.projectId, { scopes: ['project:read'] });
  const asMarker = () => stack.http().get('/tools/project').set(bearer(marker.secret));
  expect((await asMarker()).status).toBe(200); // cached now
  unseen = await addKey(stack.db, key.projectId, { scopes: ['project:read'] });
  await accounts.revokeApiKey(stack.db, marker.id);
  const until = Date.now() + 10_000;
  while ((await asMarker()).status === 200 && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
  expect((await asMarker()).status).toBe(401);
});

afterAll(async () => {
  jest.restoreAllMocks();
  await stack?.stop();
});

/** The secret with its character at `index` replaced by another base62 character. */
function wrongAt(secret: string, index: number): string {
  const c = secret[index] === 'A' ? 'B' : 'A';
  return secret.slice(0, index) + c + secret.slice(index + 1);
}

describe('digestsEqual (libs/core/src/api-keys.ts)', () => {
  it('is false for different lengths without throwing, and exact for equal lengths', () => {
    const d = digestSecret('tes_abcdefgh_' + 'x'.repeat(32));
    expect(digestsEqual(d, d.subarray(0, 31))).toBe(false);
    expect(digestsEqual(Buffer.alloc(0), d)).toBe(false);
    expect(digestsEqual(d, Buffer.from(d))).toBe(true);
    for (const i of [0, 15, 31]) {
      const other = Buffer.from(d);
      other[i] = other[i]! ^ 1;
      expect(digestsEqual(d, other)).toBe(false);
    }
  });

  it('compares through crypto.timingSafeEqual, and only on equal lengths', () => {
    const spy = jest.spyOn(crypto, 'timingSafeEqual');
    try {
      const d = digestSecret('tes_abcdefgh_' + 'y'.repeat(32));
      digestsEqual(d, Buffer.from(d));
      expect(spy).toHaveBeenCalledWith(d, expect.any(Buffer));
      spy.mockClear();
      digestsEqual(d, d.subarray(1));
      expect(spy).not.toHaveBeenCalled();
    } finally {
      spy.mockRestore();
    }
  });
});

describe('authentication in the running gateway', () => {
  it('a wrong secret with a right lookup id is rejected by timingSafeEqual over the two 32-byte digests', async () => {
    const stored = (await stack.db('api_keys').where({ id: key.keyId }).first()).digest as Buffer;
    const spy = jest.spyOn(crypto, 'timingSafeEqual');
    try {
      for (const [presented, status, equal] of [
        [wrongAt(key.secret, key.secret.length - 1), 401, false],
        [key.secret, 200, true],
      ] as const) {
        spy.mockClear();
        expect((await stack.http().get('/tools/project').set(bearer(presented))).status).toBe(status);
        const mine = digestSecret(presented);
        const calls = spy.mock.calls
          .map((args, i) => ({ args, result: spy.mock.results[i]!.value }))
          .filter(({ args }) => Buffer.from(args[0] as Buffer).equals(mine));
        expect(calls).toHaveLength(1);
        expect(Buffer.from(calls[0]!.args[1] as Buffer).equals(stored)).toBe(true);
        expect([stored.length, calls[0]!.result]).toEqual([32, equal]);
      }
    } finally {
      spy.mockRestore();
    }
  });

  it('an unknown lookup id and a malformed token still pay for a digest', async () => {
    // auth.ts reaches digestSecret through @tes/core's re-export getter, so a call-through
    // spy on the api-keys module sees the gateway's own calls.
    const spy = jest.spyOn(apiKeys, 'digestSecret');
    try {
      for (const presented of [`tes_ZZZZZZZZ_${'Q'.repeat(32)}`, 'not-a-key-at-all']) {
        spy.mockClear();
        expect((await stack.http().get('/tools/project').set(bearer(presented))).status).toBe(401);
        expect(spy).toHaveBeenCalledWith(presented);
      }
    } finally {
      spy.mockRestore();
    }
  });

  it('an unknown lookup id is compared too: timingSafeEqual over the presented digest and a 32-byte stand-in', async () => {
    const spy = jest.spyOn(crypto, 'timingSafeEqual');
    try {
      for (const presented of [`tes_ZZZZZZZY_${'Q'.repeat(32)}`, 'not-a-key-at-all']) {
        spy.mockClear();
        expect((await stack.http().get('/tools/project').set(bearer(presented))).status).toBe(401);
        const mine = digestSecret(presented);
        const calls = spy.mock.calls.filter(([a]) => Buffer.from(a as Buffer).equals(mine));
        expect(calls).toHaveLength(1);
        expect((calls[0]![1] as Buffer).length).toBe(32);
      }
    } finally {
      spy.mockRestore();
    }
  });

  it('an unknown lookup id costs what a known one with a wrong secret costs: one database lookup per cache period', async () => {
    // a key and an unknown id no request presented yet: neither is in the cache
    const fresh = unseen;
    const wrongSecret = wrongAt(fresh.secret, fresh.secret.length - 1);
    const unknown = `tes_${parseKeySecret(fresh.secret)!.split('').reverse().join('')}_${'Q'.repeat(32)}`;
    const spy = jest.spyOn(accounts, 'findApiKeyByLookupId');
    try {
      for (let i = 0; i < 5; i++) {
        for (const presented of [wrongSecret, unknown]) expect((await stack.http().get('/tools/project').set(bearer(presented))).status).toBe(401);
      }
      const lookups = (secret: string) => spy.mock.calls.filter(([, id]) => id === parseKeySecret(secret)).length;
      expect({ known: lookups(wrongSecret), unknown: lookups(unknown) }).toEqual({ known: 1, unknown: 1 });
    } finally {
      spy.mockRestore();
    }
  });

  it('smoke check: latency does not tell an unknown lookup id from a known one with a wrong secret', async () => {
    // Same method as the check below, with a tighter bound: the difference looked for is a
    // database round trip, not a memcmp, and the median of 300 interleaved pairs resolves it.
    // Before unknown ids were cached, here: medians 1.00 vs 0.53 ms (pair difference 0.47);
    // after: 0.69 vs 0.69 (0.005).
    const unknown = `tes_${'Y'.repeat(8)}_${'Q'.repeat(32)}`;
    const known = wrongAt(key.secret, key.secret.length - 1);
    const within = (r: Awaited<ReturnType<typeof measure>>) => Math.abs(r.medianFirstMs - r.medianLastMs) < 0.25 && Math.abs(r.medianPairDiffMs) < 0.25;
    const rounds: Awaited<ReturnType<typeof measure>>[] = [];
    for (let round = 0; round < 3; round++) {
      rounds.push(await measure(80 + round, unknown, known, 300));
      if (within(rounds[round]!)) break;
    }
    expect({ rounds, withinQuarterMs: within(rounds[rounds.length - 1]!) }).toEqual({ rounds, withinQuarterMs: true });
  });

  it('smoke check: latency does not depend on where the secret is wrong', async () => {
    // Only a smoke check. A wrong first vs last character changes a 32-byte memcmp by
    // nanoseconds, while one HTTP round trip through Express and Postgres on a loaded 2-core
    // machine varies by milliseconds: this cannot detect a non-constant-time comparison, only
    // a gross difference (say, an early return before a database read). The structural tests
    // above are the guarantee. Robust to noise: the two kinds are sent in interleaved pairs;
    // both the difference of the medians and the median of the per-pair differences (load
    // drifts cancel within a pair) must stay under 2 ms; a round lost to a burst of load
    // elsewhere is measured again, at most 3 rounds. A real 2 ms difference shows in every round.
    const first = wrongAt(key.secret, 13); // first character of the 32-character secret part
    const last = wrongAt(key.secret, key.secret.length - 1);
    const within = (r: Awaited<ReturnType<typeof measure>>) => Math.abs(r.medianFirstMs - r.medianLastMs) < 2 && Math.abs(r.medianPairDiffMs) < 2;
    const rounds: Awaited<ReturnType<typeof measure>>[] = [];
    for (let round = 0; round < 3; round++) {
      rounds.push(await measure(77 + round, first, last, 300));
      if (within(rounds[round]!)) break;
    }
    expect({ rounds, withinTwoMs: within(rounds[rounds.length - 1]!) }).toEqual({ rounds, withinTwoMs: true });
  });
});

const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)]!;

/**
 * `pairs` interleaved (first, last) authentications after a warmup, from loopback addresses
 * 127.0.`block`.*; latencies in ms.
 */
async function measure(block: number, first: string, last: string, pairs: number) {
  const warmup = 10;
  // Failed authentications are limited per client address (30/min), so the samples come
  // from many loopback addresses, each staying below the limit; a 429 would end the test.
  // Hazard: Linux answers on all of 127.0.0.0/8; macOS only on 127.0.0.1 without aliases.
  const perAddress = Math.floor((AUTH_FAILURES_PER_MINUTE - 2) / 2);
  const agents = new Map<string, http.Agent>();
  const port = Number(new URL(stack.baseUrl).port);
  const timed = (localAddress: string, secret: string) =>
    new Promise<number>((resolve, reject) => {
      let agent = agents.get(localAddress);
      if (!agent) agents.set(localAddress, (agent = new http.Agent({ keepAlive: true, maxSockets: 1 })));
      const started = process.hrtime.bigint();
      const req = http.request({ host: '127.0.0.1', port, path: '/tools/project', localAddress, agent, headers: bearer(secret) }, (res) => {
        res.resume();
        res.on('end', () =>
          res.statusCode === 401 ? resolve(Number(process.hrtime.bigint() - started) / 1e6) : reject(new Error(`status ${res.statusCode}`)),
        );
      });
      req.on('error', reject);
      req.end();
    });
  const firsts: number[] = [];
  const lasts: number[] = [];
  try {
    for (let i = 0; i < warmup + pairs; i++) {
      const address = `127.0.${block}.${1 + Math.floor(i / perAddress)}`;
      // alternate which goes first, so neither benefits from a warmed connection or cache
      const [a, b] = i % 2 === 0 ? [first, last] : [last, first];
      const ta = await timed(address, a);
      const tb = await timed(address, b);
      if (i < warmup) continue;
      firsts.push(a === first ? ta : tb);
      lasts.push(a === first ? tb : ta);
    }
  } finally {
    for (const agent of agents.values()) agent.destroy();
  }
  const round3 = (x: number) => Math.round(x * 1000) / 1000;
  return {
    medianFirstMs: round3(median(firsts)),
    medianLastMs: round3(median(lasts)),
    medianPairDiffMs: round3(median(firsts.map((f, i) => f - lasts[i]!))),
  };
}
