import { DEFAULT_PRICE_LIST } from '@tes/catalog';
import { canonicalJson, newId, sha256Hex } from '@tes/core';
import { getCurrentPriceVersion, publishPrices, submitExecution } from '@tes/db';
import { bearer, projectBalance, useStack, waitForExecution } from '../stack';

/**
 * A resend racing its own in-flight original (issue #11, defect 7): the original has passed the
 * gateway's checks and its submit statement is running but not committed; the prices change; the
 * resend fails the price check. It must not be told 400 (the caller would re-quote under a new
 * key and pay twice): it waits for the original and is answered with its execution. And an
 * original whose statement comes after the change is refused by the database itself, even
 * through a gateway whose view of the prices is stale.
 */
const stack = useStack();

const args = { seconds: 0, steps: 1, costMicrosPerStep: 100 };

it('a resend that a check refuses waits for its in-flight original and replays it', async () => {
  const p = await stack.seed({ creditMicros: 10_000 });
  const v1 = (await getCurrentPriceVersion(stack.db))!;
  const body = { tool: 'test.sleep', arguments: args, priceVersion: v1.version, maximumChargeMicros: 100 };
  const key = 'race-original-1';
  const id = newId('exe');
  // The original, as the gateway submits it, inside a transaction held open: in flight.
  const trx = await stack.db.transaction();
  const created = await submitExecution(trx, {
    id,
    projectId: p.projectId,
    apiKeyId: p.keyId,
    tool: 'test.sleep',
    model: 'sleep',
    category: 'test',
    arguments: args,
    priceVersion: v1.version,
    totalSteps: 1,
    reservedMicros: 100,
    idempotencyKey: key,
    requestDigest: sha256Hex(canonicalJson(body)),
    dispatchDeadlineMs: 60_000,
  });
  expect(created.kind).toBe('created');
  // The prices change while it is in flight.
  await publishPrices(stack.db, {
    ...DEFAULT_PRICE_LIST,
    tools: { ...DEFAULT_PRICE_LIST.tools, 'test.sleep': { models: { sleep: { unitPriceMicros: 0, minimumMicros: 1 } } } },
  });

  let answered = false;
  const resend = stack
    .http()
    .post('/tools/test.sleep')
    .set({ ...bearer(p.secret), 'Idempotency-Key': key })
    .send(body)
    .then((res) => {
      answered = true;
      return res;
    });
  await new Promise((r) => setTimeout(r, 500));
  expect(answered).toBe(false); // waiting for the original, not refusing
  await trx.commit();
  const res = await resend;
  expect(res.status).toBe(202);
  expect(res.headers['idempotent-replayed']).toBe('true');
  expect(res.body.data.id).toBe(id);

  expect((await waitForExecution(stack, p.secret, id)).status).toBe('succeeded');
  expect(await projectBalance(stack.db, p.projectId)).toEqual({ available: 9_900, reserved: 0 });
});

it('an original whose statement comes after a price change is refused by the database, nothing reserved', async () => {
  const p = await stack.seed({ creditMicros: 10_000 });
  const stale = (await getCurrentPriceVersion(stack.db))!.version;
  await publishPrices(stack.db, {
    ...DEFAULT_PRICE_LIST,
    tools: { ...DEFAULT_PRICE_LIST.tools, 'test.sleep': { models: { sleep: { unitPriceMicros: 0, minimumMicros: 2 } } } },
  });
  // as a gateway whose cached price list is still the old one would submit it
  const body = { tool: 'test.sleep', arguments: args, priceVersion: stale, maximumChargeMicros: 100 };
  await expect(
    submitExecution(stack.db, {
      id: newId('exe'),
      projectId: p.projectId,
      apiKeyId: p.keyId,
      tool: 'test.sleep',
      model: 'sleep',
      category: 'test',
      arguments: args,
      priceVersion: stale,
      totalSteps: 1,
      reservedMicros: 100,
      idempotencyKey: 'race-late-1',
      requestDigest: sha256Hex(canonicalJson(body)),
      dispatchDeadlineMs: 60_000,
    }),
  ).rejects.toMatchObject({ code: 'price_version_mismatch' });
  expect(await projectBalance(stack.db, p.projectId)).toEqual({ available: 10_000, reserved: 0 });
  expect(await stack.db('executions').where({ project_id: p.projectId })).toHaveLength(0);
});
