import { bearer, useStack } from '../stack';

/**
 * A request whose statement reaches a bound on waiting in Postgres (DB_LOCK_TIMEOUT_MS here) is
 * answered at that bound with the contract's transient failure, 503 service_unavailable with
 * Retry-After, never a 500 and never a request held for as long as the lock is (issue #26).
 */
const stack = useStack({ worker: false, relay: false, env: { DB_LOCK_TIMEOUT_MS: '500' } });

it('a submit stuck behind a held balance row is answered 503 service_unavailable at lock_timeout, and reserves nothing', async () => {
  const p = await stack.seed({ creditMicros: 10_000 });
  const v = (await stack.http().get('/tools').set(bearer(p.secret))).body.data.priceVersion as string;
  const holder = await stack.db.transaction();
  let answer;
  const started = Date.now();
  try {
    await holder.raw('SELECT 1 FROM projects WHERE id = ? FOR UPDATE', [p.projectId]);
    // the holder lets go only after 15 s: an unbounded wait would be answered then, with 202
    const release = setTimeout(() => void holder.rollback(), 15_000);
    try {
      answer = await stack
        .http()
        .post('/tools/test.sleep')
        .set({ ...bearer(p.secret), 'Idempotency-Key': 'held-balance-1' })
        .send({ tool: 'test.sleep', arguments: { seconds: 0, steps: 1, costMicrosPerStep: 1 }, priceVersion: v, maximumChargeMicros: 1 });
    } finally {
      clearTimeout(release);
    }
  } finally {
    if (!holder.isCompleted()) await holder.rollback();
  }
  const ms = Date.now() - started;
  expect([answer.status, answer.body.error?.message]).toEqual([503, 'service_unavailable']);
  expect(answer.body.error.status).toBe('UNAVAILABLE');
  expect(Number(answer.headers['retry-after'])).toBeGreaterThan(0);
  expect(JSON.stringify(answer.body)).not.toMatch(/lock|55P03|timeout|SELECT|UPDATE/i);
  expect(ms).toBeLessThan(10_000);
  expect(await stack.db('executions').where({ project_id: p.projectId })).toHaveLength(0);
  expect((await stack.db('projects').where({ id: p.projectId }).first('available_micros')).available_micros).toBe(10_000);
  // the same request once the row is free is accepted, under the same key
  const again = await stack
    .http()
    .post('/tools/test.sleep')
    .set({ ...bearer(p.secret), 'Idempotency-Key': 'held-balance-1' })
    .send({ tool: 'test.sleep', arguments: { seconds: 0, steps: 1, costMicrosPerStep: 1 }, priceVersion: v, maximumChargeMicros: 1 });
  expect(again.status).toBe(202);
});
