/**
 * B9's webhook receiver, a process of its own: POST /hook records each delivery (its webhook-id,
 * the execution it is about, when it arrived, what was answered) and answers 200, or 500 while a
 * failure window asked for over IPC ({type:'fail', ms}) lasts. A raw LISTEN on the triggers'
 * channel in this same process gives the floor: when the terminal change's notification
 * arrived here. {type:'report'} sends both back over IPC. Listens on 127.0.0.1:PORT only.
 */
import http from 'node:http';
import { NotifyLog, nowMs } from './push-io';

export interface Delivery {
  webhookId: string;
  executionId: string;
  /** data.finishedAt of the body (ms). */
  finishedAt: number;
  at: number;
  answered: number;
}

export interface ReceiverReport {
  deliveries: Delivery[];
  /** Per execution delivered: arrival here of its last notification (its terminal change). */
  lastNotification: Record<string, number>;
}

const port = Number(process.env.PORT);
const notify = new NotifyLog(process.env.DATABASE_URL ?? '');
const deliveries: Delivery[] = [];
let failUntil = 0;

const server = http.createServer((req, res) => {
  if (req.method !== 'POST') return void res.end('ok'); // readiness
  let raw = '';
  req.setEncoding('utf8');
  req.on('data', (c: string) => (raw += c));
  req.on('end', () => {
    const at = nowMs();
    const answered = at < failUntil ? 500 : 200;
    let data: { id?: string; finishedAt?: string } = {};
    try {
      data = (JSON.parse(raw) as { data?: typeof data }).data ?? {};
    } catch {
      // recorded with no execution: counts as nothing delivered
    }
    deliveries.push({
      webhookId: String(req.headers['webhook-id'] ?? ''),
      executionId: data.id ?? '',
      finishedAt: Date.parse(data.finishedAt ?? ''),
      at,
      answered,
    });
    res.statusCode = answered;
    res.end();
  });
});

process.on('message', (m: { type?: string; ms?: number }) => {
  if (m.type === 'fail') failUntil = nowMs() + (m.ms ?? 0);
  if (m.type === 'report') {
    const lastNotification: Record<string, number> = {};
    for (const d of deliveries) {
      const arrivals = notify.arrivals.get(d.executionId);
      if (arrivals?.length) lastNotification[d.executionId] = arrivals.at(-1)!;
    }
    process.send?.({ type: 'report', deliveries, lastNotification } satisfies ReceiverReport & { type: string });
  }
});

process.once('SIGTERM', () => {
  server.close();
  void notify.stop().then(() => process.exit(0));
});

notify
  .start()
  .then(() => server.listen(port, '127.0.0.1'))
  .catch((err: unknown) => {
    process.stderr.write(`webhook-receiver: ${(err as Error).stack}\n`);
    process.exit(1);
  });
