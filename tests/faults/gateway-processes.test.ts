import http from 'node:http';
import { childPids, seedProject } from '@tes/testing';
import { Cluster, httpStatus, sleep } from './cluster';

/**
 * GATEWAY_PROCESSES=2 on the compiled gateway: a primary and two processes sharing PORT.
 * Requests are answered across both, /metrics on the primary is the sum of both, a process
 * killed with SIGKILL is replaced while the other keeps answering, and SIGTERM stops all of
 * them cleanly.
 */
let cluster: Cluster;

beforeAll(async () => {
  cluster = await Cluster.start({ services: ['gateway'], env: { GATEWAY_PROCESSES: '2' } });
}, 60_000);

afterAll(async () => {
  await cluster?.shutdown();
}, 60_000);

/** One request on a connection of its own, so the primary hands each to the next process. */
function get(path: string, secret: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.get(`${cluster.baseUrl}${path}`, { agent: false, timeout: 5_000, headers: { authorization: `Bearer ${secret}` } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('timeout', () => req.destroy(new Error(`no answer to GET ${path} within 5 s`)));
    req.on('error', reject);
  });
}

async function requestCount(route: string): Promise<number> {
  const text = await new Promise<string>((resolve, reject) => {
    http
      .get(cluster.metricsUrl('gateway'), (res) => {
        let body = '';
        res.on('data', (d) => (body += d));
        res.on('end', () => resolve(body));
      })
      .on('error', reject);
  });
  const pattern = new RegExp(`^tes_http_request_duration_seconds_count\\{[^}]*route="${route.replace(/\//g, '\\/')}"[^}]*\\} (\\d+)`, 'gm');
  let total = 0;
  for (const m of text.matchAll(pattern)) total += Number(m[1]);
  return total;
}

it('two processes answer on one port, /metrics sums them, a killed one is replaced, SIGTERM stops all', async () => {
  const primary = cluster.process('gateway')!;
  const first = childPids(primary.child.pid!);
  expect(first).toHaveLength(2);

  const p = await seedProject(cluster.db);
  const statuses = await Promise.all(Array.from({ length: 40 }, () => get('/tools/project', p.secret)));
  expect(statuses.every((s) => s === 200)).toBe(true);
  // counted in both processes (round robin over new connections), reported once, summed
  expect(await requestCount('/tools/project')).toBe(40);

  // SIGKILL one process: once the primary has seen it die (a connection handed to it at
  // the instant of its death is lost, as with any crash), the other answers everything
  // while a replacement starts
  process.kill(first[0]!, 'SIGKILL');
  const exited = () => cluster.lines('gateway').some((l) => l.includes('"gateway.process.exited"') && l.includes('"signal":"SIGKILL"'));
  for (let i = 0; i < 100 && !exited(); i++) await sleep(50);
  expect(exited()).toBe(true);
  // scrapes keep answering while the replacement loads and starts (it is not asked until it
  // has announced itself), with the survivor's counts
  for (let i = 0; i < 8; i++) {
    const t0 = Date.now();
    expect(await requestCount('/tools/project')).toBeGreaterThan(0);
    expect(Date.now() - t0).toBeLessThan(1_500);
    await sleep(150);
  }
  for (let i = 0; i < 10; i++) expect(await get('/tools/project', p.secret)).toBe(200);
  let now = childPids(primary.child.pid!);
  for (let i = 0; i < 100 && !(now.length === 2 && !now.includes(first[0]!)); i++) {
    await sleep(100);
    now = childPids(primary.child.pid!);
  }
  expect(now).toHaveLength(2);
  expect(now).toContain(first[1]);
  expect(now).not.toContain(first[0]);
  await cluster.waitReady('gateway', 10_000);

  // SIGTERM to the primary: every process drains and exits, then the primary, with 0
  const exit = await cluster.stop('gateway', 15_000);
  expect(exit).toEqual({ code: 0, signal: null });
  expect(childPids(primary.child.pid!)).toEqual([]);
  for (const pid of now) expect(() => process.kill(pid, 0)).toThrow();
  expect(await httpStatus(`${cluster.baseUrl}/tools`)).toBeNull();
}, 60_000);

// node's cluster makes a worker whose channel to the primary closes exit at once; this
// keeps that property from being lost to a change of process model
it('if the primary is killed, its processes stop by themselves rather than run on unsupervised', async () => {
  const primary = await cluster.start('gateway');
  const children = childPids(primary.child.pid!);
  expect(children).toHaveLength(2);
  await cluster.kill('gateway');
  const alive = () =>
    children.filter((pid) => {
      try {
        process.kill(pid, 0);
        return true;
      } catch {
        return false;
      }
    });
  for (let i = 0; i < 150 && alive().length > 0; i++) await sleep(100);
  expect(alive()).toEqual([]);
}, 60_000);
