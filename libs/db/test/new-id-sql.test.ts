import { isId, newId } from '@tes/core';
import { createWebhookEndpoint } from '@tes/db';
import { seedProject, submitTestExecution, useTestDatabase } from '@tes/testing';

/**
 * tes_new_id(prefix): the database's twin of core's newId, for ids written by triggers (the
 * webhook deliveries). Same form (prefix, then a ULID: 48-bit ms time, 80 random bits, Crockford
 * base32), so a delivery id is told apart like any other and its primary key grows at the right.
 */
const { db } = useTestDatabase({ poolMax: 2 });

/** The milliseconds in a ULID's first ten characters (Crockford base32). */
function decodeTime(ulid: string): number {
  let ms = 0;
  for (let i = 0; i < 10; i++) ms = ms * 32 + '0123456789ABCDEFGHJKMNPQRSTVWXYZ'.indexOf(ulid[i]!);
  return ms;
}

/** `n` ids, and the database clock's milliseconds just before and after the statement. */
async function sqlIds(prefix: string, n: number): Promise<{ ids: string[]; from: number; to: number }> {
  const clock = async () => (await db.raw<{ rows: { ms: string }[] }>('SELECT floor(extract(epoch FROM clock_timestamp()) * 1000) AS ms')).rows[0]!.ms;
  const from = Number(await clock());
  const res = await db.raw<{ rows: { id: string }[] }>('SELECT tes_new_id(?) AS id FROM generate_series(1, ?)', [prefix, n]);
  return { ids: res.rows.map((r) => r.id), from, to: Number(await clock()) };
}

it("has core's id form, carries the database clock's millisecond and sorts by it", async () => {
  const first = await sqlIds('msg', 500);
  for (const id of first.ids) {
    expect(isId('msg', id)).toBe(true);
    const ms = decodeTime(id.slice(4));
    expect(ms).toBeGreaterThanOrEqual(first.from);
    expect(ms).toBeLessThanOrEqual(first.to);
  }
  expect(new Set(first.ids).size).toBe(500);
  await new Promise((r) => setTimeout(r, 5));
  const later = (await sqlIds('msg', 1)).ids[0]!;
  // a later millisecond sorts after every id of an earlier one, in JS's order as in the database's
  expect(first.ids.every((id) => id < later)).toBe(true);
  const { rows } = await db.raw<{ rows: { lt: boolean }[] }>('SELECT ?::text < ?::text AS lt', [first.ids[0]!, later]);
  expect(rows[0]!.lt).toBe(true);
  // and an id core makes now sorts after both (one clock on this machine)
  expect(later.slice(4) < newId('exe').slice(4)).toBe(true);
});

it('is what the webhook trigger writes: delivery ids in the msg_ ULID form', async () => {
  const p = await seedProject(db, { creditMicros: 10_000 });
  await createWebhookEndpoint(db, { projectId: p.projectId, url: 'https://hooks.test/' });
  const id = await submitTestExecution(db, p, { reservedMicros: 100 });
  await db('executions').where({ id }).update({ status: 'cancelled', finished_at: db.fn.now() });
  const deliveries = await db('webhook_deliveries').where({ execution_id: id }).select('id');
  expect(deliveries).toHaveLength(1);
  expect(isId('msg', deliveries[0].id)).toBe(true);
});
