import path from 'node:path';
import { createWebhookEndpoint, deleteWebhookEndpoint } from '@tes/db';
import { submitSpec } from './bench-http';
import { dbNow, drain } from './e2e';
import { runLoad } from './http-load';
import { freePort, sleep, startNode, stopChild, waitHttpOk, type Child } from './procs';
import type { CpuMeter } from './meter';
import type { BenchOptions } from './options';
import { quantile } from './push-io';
import type { Report } from './report';
import type { Tenant } from './seed';
import { WEBHOOK_RETRY_DELAYS_MS, WEBHOOK_TIMEOUT_MS, type ServiceStack } from './stack';
import type { ReceiverReport } from './webhook-receiver';

/** What B9 needs of push.ts's context. */
export interface B9Context {
  stack: ServiceStack;
  tenants: Tenant[];
  /** The test.sleep 0 s submit body of the half load. */
  body: Record<string, unknown>;
  o: BenchOptions;
  logDir: string;
  meter: CpuMeter;
  report: Report;
}

/**
 * B9, webhooks: every spread project gets an endpoint on a local receiver (webhook-receiver.ts),
 * then two half loads of test.sleep 0 s (B5's half rate, evenly spaced, `pushSec` long):
 *   1. terminal → delivery: from the execution's finished_at to the first 2xx-answered
 *      delivery's arrival at the receiver, next to the arrival of the same terminal change's
 *      notification on a raw LISTEN in the receiver's process (the floor);
 *   2. the receiver answers 500 for FAIL_MS from the start of the load: every ended execution
 *      must still reach it with a 2xx (distinct webhook-ids answered 2xx vs executions ended).
 * The stack runs the relay with WEBHOOK_RETRY_DELAYS_MS 0.5-8 s (stack.ts), so the retries of
 * the failing window land within the run.
 */
const FAIL_MS = 10_000;
/**
 * A claim moves the delivery's next_attempt_at this far ahead (services/relay/src/webhooks.ts:
 * the attempt timeout × 2 + 5 s), the check just before the request renews it as far, and a
 * delivered row keeps it: next_attempt_at − this is when the relay was about to send (its
 * claim, plus the few ms of building the body and that check), which splits terminal →
 * delivery into the relay's wait and its send.
 */
const CLAIM_LEASE_MS = WEBHOOK_TIMEOUT_MS * 2 + 5_000;
const ENDED = `('succeeded', 'failed', 'cancelled', 'needs_review')`;

export async function runB9(ctx: B9Context, rate: number): Promise<void> {
  const { stack, o, report, meter, tenants } = ctx;
  const port = await freePort();
  const receiver = startNode('webhook-receiver', path.join(__dirname, 'webhook-receiver.js'), {
    env: { PORT: String(port), DATABASE_URL: stack.databaseUrl },
    logDir: ctx.logDir,
  });
  meter.label(receiver.pid, 'receiver');
  const endpoints: string[] = [];
  try {
    await waitHttpOk(`http://127.0.0.1:${port}/`, receiver);
    for (const t of tenants) endpoints.push((await createWebhookEndpoint(stack.db, { projectId: t.projectId, url: `http://127.0.0.1:${port}/hook` })).id);
    const load = (name: string) =>
      runLoad(
        { ...submitSpec(tenants, ctx.body), url: stack.baseUrl, connections: o.concurrency, warmupSec: o.warmupSec, durationSec: o.pushSec, overallRate: rate },
        { logDir: ctx.logDir, name, meter },
      );

    const t0 = await dbNow(stack.db);
    meter.start();
    const first = await load('b9-half-load');
    report.cpuOf('B9 webhooks + half load', meter.stop());
    const t1 = await dbNow(stack.db);
    const pending1 = await settle(stack, t0, o.drainLimitSec);

    receiver.proc.send({ type: 'fail', ms: FAIL_MS });
    const t2 = await dbNow(stack.db);
    await load('b9-failing-receiver');
    const retriesSec = (WEBHOOK_RETRY_DELAYS_MS.reduce((a, b) => a + b, 0) * 1.1) / 1000;
    const pending2 = await settle(stack, t2, FAIL_MS / 1000 + retriesSec + o.drainLimitSec);
    const got = await askReport(receiver);

    // 1. latency over the executions accepted in the measured part of the first load
    const measured = await executions(stack, `created_at > ?::timestamptz + make_interval(secs => ?) AND created_at <= ?`, [t0, o.warmupSec, t1]);
    const firstOk = new Map<string, number>();
    for (const d of got.deliveries) if (d.answered < 300 && !firstOk.has(d.executionId)) firstOk.set(d.executionId, d.at);
    const lat: number[] = [];
    const floor: number[] = [];
    for (const [id, finished] of measured) {
      const at = firstOk.get(id);
      if (at !== undefined) lat.push(at - finished);
      const n = got.lastNotification[id];
      if (n !== undefined) floor.push(n - finished);
    }
    const undelivered1 = [...measured.keys()].filter((id) => !firstOk.has(id)).length;
    const parts = await claimParts(stack, [...measured.keys()]);

    // 2. no event lost to a failing receiver
    const ended = await executions(stack, `created_at > ? AND status IN ${ENDED}`, [t2]);
    const ok2 = got.deliveries.filter((d) => d.answered < 300 && ended.has(d.executionId));
    const distinct = new Set(ok2.map((d) => d.webhookId));
    const lost = ended.size - new Set(ok2.map((d) => d.executionId)).size;
    const refused = got.deliveries.filter((d) => d.answered >= 500 && ended.has(d.executionId)).length;
    const byStatus = await stack.db.raw<{ rows: { status: string; n: string; attempts: number }[] }>(
      `SELECT d.status, count(*) AS n, max(d.attempts) AS attempts FROM webhook_deliveries d JOIN executions e ON e.id = d.execution_id
        WHERE e.created_at > ? GROUP BY d.status ORDER BY d.status`,
      [t2],
    );
    const late = ok2.map((d) => d.at - (ended.get(d.executionId) ?? d.at));

    const [d50, d99, f50, f99] = [quantile(lat, 0.5), quantile(lat, 0.99), quantile(floor, 0.5), quantile(floor, 0.99)];
    report.add({ figure: `B9 webhook terminal→delivery p99 @ ${rate}/s`, value: d99, unit: 'ms', baseline: 'LISTEN', baselineValue: f99 });
    report.add({ figure: 'B9 webhook terminal→delivery p50', value: d50, unit: 'ms', baseline: 'LISTEN', baselineValue: f50 });
    report.add({ figure: `B9 events lost, receiver 500 for ${FAIL_MS / 1000} s`, value: lost, unit: '', target: '= 0', met: lost === 0 && pending2 === 0 });
    report.note(
      `B9 half load: ${first.okPerSec.toFixed(1)}/s submitted (asked ${rate}/s); ${lat.length} of ${measured.size} executions of the measured part delivered` +
        `${undelivered1 ? ` (${undelivered1} not)` : ''}${pending1 ? `, ${pending1} deliveries still pending after the drain` : ''}. ` +
        `Parts of terminal→delivery, p50/p99 ms (first attempts): terminal → the relay's claim ${parts}; ` +
        `the relay looks for due deliveries again at once after a claim that found some, 250 ms later after one that found none`,
    );
    report.note(
      `B9 failing receiver: ${ended.size} executions ended, ${distinct.size} distinct webhook-ids answered 2xx (${ok2.length - distinct.size} duplicates), ` +
        `${refused} attempts answered 500; deliveries in the database: ${byStatus.rows.map((r) => `${r.n} ${r.status} (≤ ${r.attempts} attempts)`).join(', ')}; ` +
        `end → 2xx p50/p99 ${quantile(late, 0.5).toFixed(0)}/${quantile(late, 0.99).toFixed(0)} ms${pending2 ? `; ${pending2} still pending after ${FAIL_MS / 1000 + retriesSec + o.drainLimitSec} s` : ''}`,
    );
    report.figure('b9DeliveryP50Ms', d50);
    report.figure('b9DeliveryP99Ms', d99);
    report.figure('b9ListenP50Ms', f50);
    report.figure('b9ListenP99Ms', f99);
    report.figure('b9Delivered', lat.length);
    report.figure('b9HalfLoadRate', rate);
    report.figure('b9FailingEnded', ended.size);
    report.figure('b9FailingDelivered', distinct.size);
    report.figure('b9Lost', lost);
    report.figure('b9Duplicates', ok2.length - distinct.size);
  } finally {
    await stopChild(receiver);
    for (const id of endpoints) await deleteWebhookEndpoint(stack.db, id);
  }
}

/** p50/p99 of terminal → claim and claim → recorded as delivered, over first-attempt deliveries of `ids`. */
async function claimParts(stack: ServiceStack, ids: string[]): Promise<string> {
  const claim = `(d.next_attempt_at - make_interval(secs => ${CLAIM_LEASE_MS / 1000}))`;
  const pct = (iv: string, q: number) => `percentile_cont(${q}) WITHIN GROUP (ORDER BY extract(epoch FROM ${iv}) * 1000)`;
  const r = await stack.db.raw<{ rows: Record<string, number | null>[] }>(
    `SELECT ${pct(`${claim} - e.finished_at`, 0.5)} AS w50, ${pct(`${claim} - e.finished_at`, 0.99)} AS w99,
            ${pct(`d.delivered_at - ${claim}`, 0.5)} AS s50, ${pct(`d.delivered_at - ${claim}`, 0.99)} AS s99
       FROM webhook_deliveries d JOIN executions e ON e.id = d.execution_id
      WHERE d.execution_id = ANY(?::text[]) AND d.status = 'delivered' AND d.attempts = 1`,
    [ids],
  );
  const x = r.rows[0] ?? {};
  const f = (v: number | null | undefined) => (typeof v === 'number' ? v.toFixed(0) : '—');
  return `${f(x.w50)}/${f(x.w99)}, claim → recorded delivered (payload read and kept, POST, record) ${f(x.s50)}/${f(x.s99)}`;
}

/** id → finished_at (ms) of the executions matching `where`. */
async function executions(stack: ServiceStack, where: string, params: unknown[]): Promise<Map<string, number>> {
  const r = await stack.db.raw<{ rows: { id: string; finished_at: Date | null }[] }>(`SELECT id, finished_at FROM executions WHERE ${where}`, params as never);
  return new Map(r.rows.filter((x) => x.finished_at).map((x) => [x.id, x.finished_at!.getTime()]));
}

/** Waits (bounded) until every execution accepted since `since` has ended and its deliveries are settled; returns those still pending. */
async function settle(stack: ServiceStack, since: Date, limitSec: number): Promise<number> {
  const until = Date.now() + limitSec * 1000;
  await drain(stack.db, since, limitSec);
  for (;;) {
    const r = await stack.db.raw<{ rows: { n: string }[] }>(
      `SELECT count(*) AS n FROM webhook_deliveries d JOIN executions e ON e.id = d.execution_id WHERE e.created_at > ? AND d.status = 'pending'`,
      [since],
    );
    const n = Number(r.rows[0]!.n);
    if (n === 0 || Date.now() > until) return n;
    await sleep(250);
  }
}

function askReport(receiver: Child): Promise<ReceiverReport> {
  return new Promise((resolve, reject) => {
    receiver.proc.on('message', (m: ReceiverReport & { type?: string }) => m.type === 'report' && resolve(m));
    void receiver.exited.then(() => reject(new Error(`the webhook receiver exited; see ${receiver.logFile}`)));
    receiver.proc.send({ type: 'report' });
  });
}
