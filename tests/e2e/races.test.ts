import { loadConfig } from '@tes/config';
import { AmqpClient, topologyNames } from '@tes/messaging';
import { startRelay } from '../../services/relay/src/server';
import { bearer, projectBalance, useStack, waitForExecution } from '../stack';
import { addKey } from '@tes/testing';

/** Races the design must win: cancel vs completion, duplicate messages, two relays. */
const stack = useStack({ env: { RATE_LIMIT_PER_MINUTE: '100000', OUTBOX_GRACE_MS: '200' } });

async function priceVersion(secret: string): Promise<string> {
  return (await stack.http().get('/tools').set(bearer(secret))).body.data.priceVersion;
}

async function submit(secret: string, key: string, args: Record<string, unknown>, max: number, v: string): Promise<string> {
  const res = await stack
    .http()
    .post('/tools/test.sleep')
    .set({ ...bearer(secret), 'Idempotency-Key': key })
    .send({ tool: 'test.sleep', arguments: args, priceVersion: v, maximumChargeMicros: max });
  expect(res.status).toBe(202);
  return res.body.data.id;
}

async function withChannel<T>(fn: (ch: import('amqplib').Channel) => Promise<T>): Promise<T> {
  const amqp = new AmqpClient({ url: stack.config.amqpUrl, logger: stack.logger, name: 'test-races' });
  let out: T | undefined;
  await amqp.addSetup(async (conn) => {
    const ch = await conn.createConfirmChannel();
    out = await fn(ch);
    await ch.close();
  });
  await amqp.start();
  await amqp.stop();
  return out as T;
}

it('cancel racing completion: every execution ends once, succeeded in full or cancelled with completed steps only', async () => {
  const p = await stack.seed({ creditMicros: 1_000_000 });
  const v = await priceVersion(p.secret);
  const ids: string[] = [];
  for (let i = 0; i < 16; i++)
    ids.push(await submit(p.secret, `race-cancel-${String(i).padStart(2, '0')}`, { seconds: 0.05, steps: 2, costMicrosPerStep: 1_000 }, 2_000, v));
  // cancels land at staggered moments: before the claim, between steps, after the end
  await Promise.all(
    ids.map(async (id, i) => {
      await new Promise((r) => setTimeout(r, (i % 8) * 15));
      const res = await stack.http().post(`/tools/executions/${id}/cancel`).set(bearer(p.secret));
      expect([200, 202, 400]).toContain(res.status);
      if (res.status === 400) expect(res.body.error.message).toBe('execution_not_cancellable');
    }),
  );
  let charged = 0;
  for (const id of ids) {
    const e = await waitForExecution(stack, p.secret, id);
    const completed = (e.steps as { status: string }[]).filter((s) => s.status === 'succeeded').length;
    if (e.status === 'succeeded') expect(e.chargedMicros).toBe(2_000);
    else {
      expect(e.status).toBe('cancelled');
      expect(e.chargedMicros).toBe(completed * 1_000);
    }
    charged += e.chargedMicros as number;
    const settlements = await stack.db('ledger_entries').where({ execution_id: id, kind: 'settle', account: 'charged' });
    expect(settlements).toHaveLength(1);
  }
  expect(await projectBalance(stack.db, p.projectId)).toEqual({ available: 1_000_000 - charged, reserved: 0 });
});

it('duplicate and redelivered messages for one execution run it once and settle it once', async () => {
  const p = await stack.seed({ creditMicros: 100_000 });
  const v = await priceVersion(p.secret);
  await stack.stopWorker();
  const id = await submit(p.secret, 'race-dup-01', { seconds: 0.2, steps: 2, costMicrosPerStep: 700 }, 1_400, v);
  const names = topologyNames(stack.config.amqpPrefix, stack.config.waitRecheckMs);
  await withChannel(async (ch) => {
    for (let i = 0; i < 6; i++)
      (ch as import('amqplib').ConfirmChannel).publish(names.exchange, 'test', Buffer.from(JSON.stringify({ executionId: id, projectId: p.projectId })), {
        persistent: true,
      });
    await (ch as import('amqplib').ConfirmChannel).waitForConfirms();
  });
  await stack.startWorker({ WORKER_CONCURRENCY: '4' });
  const done = await waitForExecution(stack, p.secret, id);
  expect(done).toMatchObject({ status: 'succeeded', chargedMicros: 1_400 });
  const steps = await stack.db('execution_steps').where({ execution_id: id });
  expect(steps.map((s: { attempts: number }) => s.attempts)).toEqual([1, 1]);
  expect(await stack.db('ledger_entries').where({ execution_id: id, kind: 'settle', account: 'charged' })).toHaveLength(1);
  await new Promise((r) => setTimeout(r, 300)); // the other copies were acked without effect
  expect(await stack.db('executions').where({ id }).first()).toMatchObject({ claims: 1, attempts: 0 });
});

it('two relays sweeping the same outbox publish each row exactly once', async () => {
  const p = await stack.seed({ creditMicros: 1_000_000 });
  const key2 = await addKey(stack.db, p.projectId);
  const v = await priceVersion(p.secret);
  await stack.stopWorker();
  const ids: string[] = [];
  for (let i = 0; i < 30; i++)
    ids.push(await submit(i % 2 ? key2.secret : p.secret, `race-relay-${String(i).padStart(2, '0')}`, { seconds: 0, steps: 1, costMicrosPerStep: 1 }, 1, v));
  const names = topologyNames(stack.config.amqpPrefix, stack.config.waitRecheckMs);
  const queue = names.queueFor('test');
  // lose every message, as if the gateway had died before publishing any
  for (let i = 0; i < 50 && (await stack.db('outbox').whereIn('execution_id', ids).whereNull('published_at')).length > 0; i++)
    await new Promise((r) => setTimeout(r, 50));
  await withChannel((ch) => ch.purgeQueue(queue));
  await stack.db('outbox').whereIn('execution_id', ids).update({ published_at: null });
  const second = await startRelay(loadConfig({ ...process.env, ...stackEnv() }), stack.logger);
  try {
    for (let i = 0; i < 100 && (await stack.db('outbox').whereIn('execution_id', ids).whereNull('published_at')).length > 0; i++) {
      await new Promise((r) => setTimeout(r, 100));
    }
    const depth = await withChannel(async (ch) => (await ch.checkQueue(queue)).messageCount);
    expect(depth).toBe(30);
  } finally {
    for (const part of second.parts) await part.stop();
  }
  await stack.startWorker();
  for (const id of ids) expect((await waitForExecution(stack, p.secret, id)).status).toBe('succeeded');
});

/** The environment the stack's own services run with, for a second relay beside them. */
function stackEnv(): Record<string, string> {
  const c = stack.config;
  return {
    DATABASE_URL: c.databaseUrl,
    AMQP_URL: c.amqpUrl,
    AMQP_PREFIX: c.amqpPrefix,
    S3_ENDPOINT: c.s3.endpoint,
    S3_BUCKET: c.s3.bucket,
    S3_ACCESS_KEY_ID: c.s3.accessKeyId,
    S3_SECRET_ACCESS_KEY: c.s3.secretAccessKey,
    ENABLE_TEST_TOOLS: '1',
    METRICS_PORT: '0',
    OUTBOX_SWEEP_INTERVAL_MS: '100',
    OUTBOX_GRACE_MS: '0',
    WAIT_RECHECK_MS: String(c.waitRecheckMs),
    LOG_LEVEL: 'warn',
  };
}
