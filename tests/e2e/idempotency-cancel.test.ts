import { bearer, projectBalance, waitForExecution, useStack } from '../stack';
import { addKey } from '@tes/testing';

const stack = useStack();

async function priceVersion(secret: string): Promise<string> {
  return (await stack.http().get('/tools').set(bearer(secret))).body.data.priceVersion;
}

function post(secret: string, key: string, body: Record<string, unknown>) {
  return stack
    .http()
    .post(`/tools/${body.tool as string}`)
    .set({ ...bearer(secret), 'Idempotency-Key': key })
    .send(body);
}

describe('idempotency', () => {
  it('a resend returns the same execution (202 while open, 200 once terminal); key order does not matter', async () => {
    const p = await stack.seed({ creditMicros: 10_000 });
    const body = {
      tool: 'test.sleep',
      arguments: { seconds: 0.3, steps: 1, costMicrosPerStep: 100 },
      priceVersion: await priceVersion(p.secret),
      maximumChargeMicros: 100,
    };
    const first = await post(p.secret, 'same-key-001', body);
    expect(first.status).toBe(202);
    const reordered = {
      maximumChargeMicros: 100,
      priceVersion: body.priceVersion,
      arguments: { costMicrosPerStep: 100, steps: 1, seconds: 0.3 },
      tool: 'test.sleep',
    };
    const again = await post(p.secret, 'same-key-001', reordered);
    expect(again.status).toBe(202);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body.data.id).toBe(first.body.data.id);
    await waitForExecution(stack, p.secret, first.body.data.id);
    const after = await post(p.secret, 'same-key-001', body);
    expect(after.status).toBe(200);
    expect(after.body.data).toMatchObject({ id: first.body.data.id, status: 'succeeded', chargedMicros: 100 });
    const n = await stack.db('executions').where({ project_id: p.projectId }).count<{ n: string }[]>({ n: '*' });
    expect(Number(n[0]!.n)).toBe(1);
    expect(await projectBalance(stack.db, p.projectId)).toEqual({ available: 9_900, reserved: 0 });
  });

  it('same key with another body, or from another key of the project: 409, nothing reserved', async () => {
    const p = await stack.seed({ creditMicros: 10_000 });
    const other = await addKey(stack.db, p.projectId);
    const body = {
      tool: 'test.sleep',
      arguments: { seconds: 0, steps: 1, costMicrosPerStep: 100 },
      priceVersion: await priceVersion(p.secret),
      maximumChargeMicros: 100,
    };
    expect((await post(p.secret, 'conflict-01', body)).status).toBe(202);
    const changed = await post(p.secret, 'conflict-01', { ...body, maximumChargeMicros: 200 });
    expect(changed.status).toBe(409);
    expect(changed.body.error).toEqual({ status: 'ALREADY_EXISTS', message: 'idempotency_key_reused' });
    const otherKey = await post(other.secret, 'conflict-01', body);
    expect(otherKey.status).toBe(409);
    const rows = await stack.db('ledger_entries').where({ project_id: p.projectId, kind: 'reserve', account: 'reserved' });
    expect(rows).toHaveLength(1);
  });

  it('50 concurrent identical submits create exactly one execution and one reservation', async () => {
    const p = await stack.seed({ creditMicros: 10_000 });
    const body = {
      tool: 'test.sleep',
      arguments: { seconds: 0, steps: 1, costMicrosPerStep: 300 },
      priceVersion: await priceVersion(p.secret),
      maximumChargeMicros: 300,
    };
    const results = await Promise.all(Array.from({ length: 50 }, () => post(p.secret, 'concurrent-01', body)));
    const ids = new Set(results.map((r) => r.body.data?.id));
    expect(results.every((r) => r.status === 202 || r.status === 200)).toBe(true);
    expect(ids.size).toBe(1);
    const reservations = await stack.db('ledger_entries').where({ project_id: p.projectId, kind: 'reserve', account: 'reserved' });
    expect(reservations).toHaveLength(1);
    await waitForExecution(stack, p.secret, [...ids][0] as string);
    expect(await projectBalance(stack.db, p.projectId)).toEqual({ available: 9_700, reserved: 0 });
  });

  it('concurrent submits against a balance that covers k of them accept exactly k', async () => {
    const p = await stack.seed({ creditMicros: 7 * 1_000 + 500 });
    const v = await priceVersion(p.secret);
    const body = { tool: 'test.sleep', arguments: { seconds: 0, steps: 1, costMicrosPerStep: 1_000 }, priceVersion: v, maximumChargeMicros: 1_000 };
    const results = await Promise.all(Array.from({ length: 20 }, (_, i) => post(p.secret, `oversub-${String(i).padStart(3, '0')}`, body)));
    expect(results.filter((r) => r.status === 202)).toHaveLength(7);
    const refused = results.filter((r) => r.status === 429);
    expect(refused).toHaveLength(13);
    expect(refused.every((r) => r.body.error.message === 'insufficient_balance')).toBe(true);
    const bal = await projectBalance(stack.db, p.projectId);
    expect(bal.available).toBeGreaterThanOrEqual(0);
    expect(bal.available + bal.reserved).toBeLessThanOrEqual(7_500);
  });
});

it('concurrent submits against a monthly cap that covers k of them accept exactly k', async () => {
  const p = await stack.seed({ creditMicros: 1_000_000, monthlyCapMicros: 5 * 1_000 + 999 });
  const other = await addKey(stack.db, p.projectId);
  const v = await priceVersion(p.secret);
  const body = { tool: 'test.sleep', arguments: { seconds: 0, steps: 1, costMicrosPerStep: 1_000 }, priceVersion: v, maximumChargeMicros: 1_000 };
  // two keys of the project race for the same cap
  const results = await Promise.all(Array.from({ length: 16 }, (_, i) => post(i % 2 ? other.secret : p.secret, `capsub-${String(i).padStart(3, '0')}`, body)));
  expect(results.filter((r) => r.status === 202)).toHaveLength(5);
  const refused = results.filter((r) => r.status === 429);
  expect(refused).toHaveLength(11);
  expect(refused.every((r) => r.body.error.message === 'monthly_cap_exceeded')).toBe(true);
  const row = await stack.db('projects').where({ id: p.projectId }).first();
  expect(row.reserved_micros + row.month_charged_micros).toBeLessThanOrEqual(5_999);
});

describe('cancel', () => {
  it('a queued execution is cancelled at once with its whole reservation released', async () => {
    const p = await stack.seed({ creditMicros: 10_000 });
    await stack.stopWorker(); // keep it queued
    try {
      const body = {
        tool: 'test.sleep',
        arguments: { seconds: 0, steps: 2, costMicrosPerStep: 1_000 },
        priceVersion: await priceVersion(p.secret),
        maximumChargeMicros: 2_000,
      };
      const sub = await post(p.secret, 'cancel-queued', body);
      expect(await projectBalance(stack.db, p.projectId)).toEqual({ available: 8_000, reserved: 2_000 });
      const res = await stack.http().post(`/tools/executions/${sub.body.data.id}/cancel`).set(bearer(p.secret));
      expect(res.status).toBe(200);
      expect(res.body.data).toMatchObject({ status: 'cancelled', chargedMicros: 0, cancelRequested: true });
      expect(await projectBalance(stack.db, p.projectId)).toEqual({ available: 10_000, reserved: 0 });
      const again = await stack.http().post(`/tools/executions/${sub.body.data.id}/cancel`).set(bearer(p.secret));
      expect(again.status).toBe(200);
      expect(again.body.data.status).toBe('cancelled');
    } finally {
      await stack.startWorker();
    }
    // the message still in the queue finds a terminal execution and changes nothing
    await new Promise((r) => setTimeout(r, 500));
    expect(await projectBalance(stack.db, p.projectId)).toEqual({ available: 10_000, reserved: 0 });
  });

  it('a running execution stops before its next step and is charged only completed steps', async () => {
    const p = await stack.seed({ creditMicros: 10_000 });
    const body = {
      tool: 'test.sleep',
      arguments: { seconds: 0.4, steps: 5, costMicrosPerStep: 1_000 },
      priceVersion: await priceVersion(p.secret),
      maximumChargeMicros: 5_000,
    };
    const sub = await post(p.secret, 'cancel-running', body);
    const id = sub.body.data.id as string;
    await waitForExecution(stack, p.secret, id, (e) => (e.progress as { completedSteps: number }).completedSteps >= 1);
    const res = await stack.http().post(`/tools/executions/${id}/cancel`).set(bearer(p.secret));
    expect(res.status).toBe(202);
    expect(res.body.data.cancelRequested).toBe(true);
    const done = await waitForExecution(stack, p.secret, id);
    expect(done.status).toBe('cancelled');
    const completed = (done.steps as { status: string }[]).filter((s) => s.status === 'succeeded').length;
    expect(completed).toBeGreaterThanOrEqual(1);
    expect(completed).toBeLessThan(5);
    expect(done.chargedMicros).toBe(completed * 1_000);
    expect(await projectBalance(stack.db, p.projectId)).toEqual({ available: 10_000 - completed * 1_000, reserved: 0 });
  });

  it('terminal executions are not cancellable; only the creating key or an ADMIN may cancel', async () => {
    const p = await stack.seed({ creditMicros: 10_000, role: 'MEMBER' });
    const member = await addKey(stack.db, p.projectId, { role: 'MEMBER' });
    const admin = await addKey(stack.db, p.projectId, { role: 'ADMIN' });
    const body = {
      tool: 'test.sleep',
      arguments: { seconds: 0, steps: 1, costMicrosPerStep: 10 },
      priceVersion: await priceVersion(p.secret),
      maximumChargeMicros: 10,
    };
    const sub = await post(p.secret, 'cancel-done-1', body);
    await waitForExecution(stack, p.secret, sub.body.data.id);
    const denied = await stack.http().post(`/tools/executions/${sub.body.data.id}/cancel`).set(bearer(member.secret));
    expect(denied.status).toBe(403);
    expect(denied.body.error).toEqual({ status: 'PERMISSION_DENIED', message: 'execution_cancel_not_allowed' });
    const late = await stack.http().post(`/tools/executions/${sub.body.data.id}/cancel`).set(bearer(admin.secret));
    expect(late.status).toBe(400);
    expect(late.body.error).toMatchObject({ status: 'FAILED_PRECONDITION', message: 'execution_not_cancellable' });
  });
});
