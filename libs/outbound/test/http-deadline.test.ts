import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { GuardedHttp } from '../src';

/**
 * GuardedHttp's whole-request deadline (issue #25): a peer that answers its headers and then
 * trickles its body, each byte well inside the idle timeout, is cut off at the deadline, and
 * the deadline counts from the first request across redirect hops.
 */
let server: http.Server;
let base: string;

beforeAll(async () => {
  server = http.createServer((req, res) => {
    if (req.url === '/redirect') {
      // a slow first hop, then a redirect to the trickle
      setTimeout(() => res.writeHead(302, { location: '/trickle' }).end(), 300);
      return;
    }
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.flushHeaders();
    const timer = setInterval(() => res.write('.'), 50);
    res.on('close', () => clearInterval(timer));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

const guarded = new GuardedHttp({ allowPrivateNetworks: true });

async function timed(url: string): Promise<{ ms: number; err: Error }> {
  const started = Date.now();
  const err = await guarded.request('GET', url, { signal: new AbortController().signal, timeoutMs: 400, deadlineMs: 600 }).then(
    () => new Error('answered'),
    (e: unknown) => e as Error,
  );
  return { ms: Date.now() - started, err };
}

it('ends a trickled answer at the deadline, which the idle timeout alone never would', async () => {
  const { ms, err } = await timed(`${base}/trickle`);
  expect(err.message).toBe('no complete answer within the 600 ms deadline');
  expect(ms).toBeGreaterThanOrEqual(590);
  expect(ms).toBeLessThan(900);
});

it('counts the deadline from the first hop of a redirect', async () => {
  const { ms, err } = await timed(`${base}/redirect`);
  expect(err.message).toBe('no complete answer within the 600 ms deadline');
  expect(ms).toBeLessThan(900); // not 300 ms + a fresh 600 ms
});
