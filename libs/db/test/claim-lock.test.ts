import { auditLedger, claimNextFair, createDb, publishPrices } from '@tes/db';
import { seedProject, startTcpRelay, submitTestExecution, useTestDatabase } from '@tes/testing';

/**
 * Claims of a category are serialized by the claim lock (claimNextFair), and the lock lives
 * inside the server: the claim is one statement, decided and committed before its answer leaves
 * PostgreSQL. So a claimer whose process stalls after sending its claim (an event loop busy on a
 * saturated machine, a GC pause, a slow network) holds nothing, and the category's next claim goes
 * on. Held across the client's round trips, as it was, the lock waited on the slowest claimer's
 * process: 15 ms a claim under B5 for a 0.5 ms pick (docs/performance.md#the-claims-lock).
 */
const { db, database } = useTestDatabase({ poolMax: 2 });

afterEach(async () => {
  expect((await auditLedger(db)).problems).toEqual([]);
});

it('a claimer that stalls after sending its claim holds no lock: its claim is made, and the next claim of the category goes on', async () => {
  const category = 'stalled-claimer';
  const { priceVersion } = await publishPrices(db, { 'test.sleep': 1 });
  const [a, b] = [await seedProject(db, { creditMicros: 100_000 }), await seedProject(db, { creditMicros: 100_000 })];
  const first = await submitTestExecution(db, a, { priceVersion, category });
  const second = await submitTestExecution(db, b, { priceVersion, category });
  const relay = await startTcpRelay(database.url, 5432);
  const slow = createDb({ url: relay.url, poolMax: 1, applicationName: 'tes-claim-stalled' });
  const input = { category, leaseTtlMs: 60_000, share: 1, ownSlots: 4 };
  try {
    await slow.raw('SELECT 1'); // its connection is open before the answers are held
    relay.holdAnswers(true);
    const stalled = claimNextFair(slow, { ...input, owner: 'wrk_stalled' });
    // the claim is made in the server although its client has heard nothing of it
    const deadline = Date.now() + 5_000;
    let claimedThere: string | undefined;
    while (claimedThere === undefined && Date.now() < deadline) {
      claimedThere = (await db('executions').where({ lease_owner: 'wrk_stalled:1' }).first('id'))?.id as string | undefined;
      if (claimedThere === undefined) await new Promise((r) => setTimeout(r, 20));
    }
    expect(claimedThere).toBe(first); // the oldest head of the two projects
    // and the category's next claim does not wait for that client
    const t = Date.now();
    const next = await claimNextFair(db, { ...input, owner: 'wrk_prompt' });
    expect(next?.id).toBe(second);
    expect(Date.now() - t).toBeLessThan(2_000);
    relay.holdAnswers(false);
    const heard = await stalled;
    expect(heard?.id).toBe(first);
    expect(heard?.lease).toBe('wrk_stalled:1');
  } finally {
    relay.holdAnswers(false);
    await slow.destroy();
    await relay.close();
  }
});

it("waits for the lock the previous release's claim holds, so a rolling deploy's claims of a category stay serialized", async () => {
  const category = 'mixed-releases';
  const { priceVersion } = await publishPrices(db, { 'test.sleep': 1 });
  const p = await seedProject(db, { creditMicros: 100_000 });
  const id = await submitTestExecution(db, p, { priceVersion, category });
  // the previous release claimed in a transaction of its own: BEGIN, this lock, its pick, COMMIT
  const previous = await db.transaction();
  try {
    await previous.raw(`SELECT pg_advisory_xact_lock(hashtextextended('tes_claim:' || ?::text, 0))`, [category]);
    let done = false;
    const claiming = claimNextFair(db, { category, owner: 'wrk_new', leaseTtlMs: 60_000, share: 1, ownSlots: 4 }).finally(() => (done = true));
    await new Promise((r) => setTimeout(r, 300));
    expect(done).toBe(false); // in line behind the previous release's claim
    await previous.commit();
    expect((await claiming)?.id).toBe(id);
  } finally {
    if (!previous.isCompleted()) await previous.rollback();
  }
});
