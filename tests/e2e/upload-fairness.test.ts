import net from 'node:net';
import { createOrganization, createProject } from '@tes/db';
import { addKey } from '@tes/testing';
import { bearer, useStack } from '../stack';

/**
 * Upload slots are shared fairly by project and organization (issue #25: with 2 slots, one per
 * project, and a 32 KiB/s floor, two projects of one organization each trickling at 40 KiB/s
 * made every other project's upload get 503 for as long as they liked). Here: 2 slots, a
 * 1 KiB/s floor the tricklers stay above (4 KB/s), and a 1.5 s turn.
 */
const stack = useStack({ worker: false, env: { UPLOAD_CONCURRENCY: '2', UPLOAD_MIN_BYTES_PER_SECOND: '1024', UPLOAD_SLOT_TURN_MS: '1500' } });

const PNG = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==', 'base64');

/** An upload whose body is trickled at 4 KB/s (above the floor) until the gateway answers. */
interface Trickle {
  answer: Promise<string>;
  stop(): void;
}
function trickle(secret: string): Promise<Trickle> {
  const url = new URL(stack.baseUrl);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(url.port), url.hostname, () => {
      socket.write(
        `POST /tools/upload HTTP/1.1\r\nHost: ${url.host}\r\nAuthorization: Bearer ${secret}\r\n` +
          `Content-Type: application/json\r\nContent-Length: 1000000\r\n\r\n{"mimeType":"image/png","data":"`,
      );
      const timer = setInterval(() => socket.writable && socket.write('A'.repeat(400)), 100);
      let text = '';
      // the answer is complete once its JSON body is (the gateway may keep the connection open)
      const answer = new Promise<string>((done) => {
        socket.on('data', (d: Buffer) => {
          text += d.toString();
          if (/\r\n\r\n\{.*\}$/s.test(text)) done(text);
        });
        socket.on('close', () => done(text));
      });
      void answer.then(() => {
        clearInterval(timer);
        socket.destroy();
      });
      // the gateway has taken (or refused) the slot once it starts reading; give it a moment
      setTimeout(() => resolve({ answer, stop: () => socket.destroy() }), 300);
    });
    socket.on('error', reject);
  });
}

const tricklers: Trickle[] = [];
afterEach(() => {
  for (const t of tricklers.splice(0)) t.stop();
});

/** Uploads a small PNG, retrying after each 503's Retry-After, until `withinMs` has passed. */
async function uploadWithin(secret: string, withinMs: number) {
  const started = Date.now();
  const refusals: { retryAfter: number; reason: string }[] = [];
  for (;;) {
    const res = await stack
      .http()
      .post('/tools/upload')
      .set(bearer(secret))
      .send({ mimeType: 'image/png', data: PNG.toString('base64') });
    if (res.status !== 503) return { status: res.status, ms: Date.now() - started, refusals };
    refusals.push({ retryAfter: Number(res.headers['retry-after']), reason: res.body.error.details.reason as string });
    const wait = Math.max(1, refusals.at(-1)!.retryAfter) * 1000;
    if (Date.now() - started + wait > withinMs) return { status: res.status, ms: Date.now() - started, refusals };
    await new Promise((r) => setTimeout(r, wait));
  }
}

it("two projects of one organization trickling uploads hold one slot between them: a third project's upload succeeds at once", async () => {
  const org = await createOrganization(stack.db, 'Two projects');
  const secrets = [];
  for (const name of ['one', 'two']) secrets.push((await addKey(stack.db, (await createProject(stack.db, { organizationId: org.id, name })).id)).secret);
  for (const s of secrets) tricklers.push(await trickle(s));
  const third = await stack.seed();
  const got = await uploadWithin(third.secret, 10_000);
  expect(got.refusals).toEqual([]);
  expect(got.status).toBe(200);
  expect(got.ms).toBeLessThan(2_000);
  // the organization's second upload was refused before its body was read
  const second = await tricklers[1]!.answer;
  expect(second).toMatch(/^HTTP\/1\.1 503/);
  expect(second).toMatch(/retry-after: \d+/i);
  expect(second).toContain('organization already has 1 upload(s) in progress');
});

it('two projects of two organizations trickling uploads keep a third project out for one turn at most: the longest-held is cut with 503', async () => {
  const [a, b, c] = [await stack.seed(), await stack.seed(), await stack.seed()];
  tricklers.push(await trickle(a.secret));
  tricklers.push(await trickle(b.secret));
  const got = await uploadWithin(c.secret, 10_000);
  expect(got.status).toBe(200);
  // refused until the first trickle's turn (1.5 s) was over, told when that would be
  expect(got.refusals.length).toBeLessThanOrEqual(1);
  for (const r of got.refusals) expect(r.retryAfter).toBeLessThanOrEqual(2);
  expect(got.ms).toBeLessThan(4_000);
  const cut = await tricklers[0]!.answer;
  expect(cut).toMatch(/^HTTP\/1\.1 503/);
  expect(cut).toMatch(/retry-after: 2/i);
  expect(cut).toMatch(/cache-control: no-store/i);
  expect(cut).toContain('"message":"service_unavailable"');
  expect(cut).toMatch(/still arriving after \d+ s while another project waited/);
  // the other trickle still holds its slot
  await new Promise((r) => setTimeout(r, 200));
  let settled = false;
  void tricklers[1]!.answer.then(() => (settled = true));
  await new Promise((r) => setTimeout(r, 50));
  expect(settled).toBe(false);
});
