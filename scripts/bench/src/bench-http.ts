import path from 'node:path';
import { runLoad, type LoadResult, type LoadSpec } from './http-load';
import type { CpuMeter } from './meter';
import type { BenchOptions } from './options';
import type { PgbenchDb, PgbenchResult } from './pgbench';
import { freePort, startNode, stopChild, waitHttpOk, type Child } from './procs';
import type { Tenant } from './seed';

export type Measured = LoadResult & { cpu: Record<string, number> };

/** One load run with the CPU meter around it. */
export async function measure(spec: LoadSpec, name: string, logDir: string, meter: CpuMeter): Promise<Measured> {
  meter.start();
  try {
    const r = await runLoad(spec, { logDir, name, meter });
    return { ...r, cpu: meter.stop() };
  } catch (err) {
    meter.stop();
    throw err;
  }
}

export interface Baselines {
  express: { url: string; child: Child };
  node: { url: string; child: Child };
  /** Our stack's floor (floor-child.ts): Express + node-postgres + the one statement of B1 / of B3. */
  floor: { url: string; child: Child };
  stop(): Promise<void>;
}

/** Where the floor reads (B1: the bench's executions) and writes (B3: the pgbench scratch database's projects). */
export interface FloorSetup {
  pollDatabaseUrl: string;
  submitDatabaseUrl: string;
  submitProjects: number;
  /** The gateway's database connections in all, so the floor gets the same parallelism. */
  poolMax: number;
}

/** The Express 5 and node:http hello-world servers and the floor, each a child with NODE_ENV=production. */
export async function startBaselines(logDir: string, meter: CpuMeter, floorSetup: FloorSetup, cpuProf = false): Promise<Baselines> {
  const start = async (name: string, script: string, args: string[], env: Record<string, string>) => {
    const port = await freePort();
    // --cpu-prof: the baselines are profiled too, so a profile of ours can be read against theirs
    const nodeArgs = cpuProf ? ['--cpu-prof', `--cpu-prof-dir=${logDir}`, `--cpu-prof-name=${name}.cpuprofile`] : [];
    const child = startNode(name, path.join(__dirname, script), { args, env: { NODE_ENV: 'production', PORT: String(port), ...env }, logDir, nodeArgs });
    meter.label(child.pid, name);
    const url = `http://127.0.0.1:${port}`;
    await waitHttpOk(`${url}/`, child);
    return { url, child };
  };
  const express = await start('hello-express', 'hello-child.js', ['express'], {});
  const node = await start('hello-node', 'hello-child.js', ['node'], {});
  const floor = await start('floor', 'floor-child.js', [], {
    POLL_DATABASE_URL: floorSetup.pollDatabaseUrl,
    SUBMIT_DATABASE_URL: floorSetup.submitDatabaseUrl,
    SUBMIT_PROJECTS: String(floorSetup.submitProjects),
    POOL_MAX: String(floorSetup.poolMax),
  });
  return {
    express,
    node,
    floor,
    stop: async () => {
      await stopChild(express.child);
      await stopChild(node.child);
      await stopChild(floor.child);
    },
  };
}

export interface VersusBaselines {
  gateway: Measured;
  /** The floor under the same request stream (B1 only; B2 has none). */
  floor: Measured | undefined;
  express: Measured;
  node: Measured;
}

/**
 * B1/B2: the same request stream (same keys, paths, headers and body, same connections and
 * durations) against the gateway and against both hello-world servers.
 */
export async function runVersus(
  name: string,
  spec: Omit<LoadSpec, 'url' | 'connections' | 'warmupSec' | 'durationSec'>,
  gatewayUrl: string,
  baselines: Baselines,
  o: BenchOptions,
  logDir: string,
  meter: CpuMeter,
  withFloor = false,
): Promise<VersusBaselines> {
  const full = (url: string): LoadSpec => ({ ...spec, url, connections: o.connections, warmupSec: o.warmupSec, durationSec: o.durationSec });
  const gateway = await measure(full(gatewayUrl), `${name}-gateway`, logDir, meter);
  const floor = withFloor ? await measure(full(baselines.floor.url), `${name}-floor`, logDir, meter) : undefined;
  const express = await measure(full(baselines.express.url), `${name}-express`, logDir, meter);
  const node = await measure(full(baselines.node.url), `${name}-node`, logDir, meter);
  return { gateway, floor, express, node };
}

export function getExecutionSpec(tenants: Tenant[]): Omit<LoadSpec, 'url' | 'connections' | 'warmupSec' | 'durationSec'> {
  return {
    method: 'GET',
    targets: tenants.map((t) => ({ secret: t.secret, path: `/tools/executions/${t.executionId}` })),
    headers: {},
    idempotent: false,
  };
}

export function quoteSpec(tenants: Tenant[], body: Record<string, unknown>): Omit<LoadSpec, 'url' | 'connections' | 'warmupSec' | 'durationSec'> {
  return {
    method: 'POST',
    targets: tenants.map((t) => ({ secret: t.secret, path: '/tools/quote' })),
    headers: {},
    body: JSON.stringify({ tool: body.tool, arguments: body.arguments }),
    idempotent: false,
  };
}

export function submitSpec(tenants: Tenant[], body: Record<string, unknown>): Omit<LoadSpec, 'url' | 'connections' | 'warmupSec' | 'durationSec'> {
  return {
    method: 'POST',
    targets: tenants.map((t) => ({ secret: t.secret, path: '/tools/test.sleep' })),
    headers: {},
    body: JSON.stringify(body),
    idempotent: true,
  };
}

export type PgbenchMeasured = PgbenchResult & { cpu: Record<string, number> };

/** B3/B4's ceiling: the submit transaction in pgbench, over `projects` projects. */
export async function measurePgbench(db: PgbenchDb, projects: number, name: string, o: BenchOptions, meter: CpuMeter): Promise<PgbenchMeasured> {
  if (o.warmupSec > 0) await db.run({ projects, clients: o.pgbenchClients, durationSec: o.warmupSec, name: `${name}-warmup` });
  meter.start();
  try {
    const r = await db.run({ projects, clients: o.pgbenchClients, durationSec: o.durationSec, name, meter });
    return { ...r, cpu: meter.stop() };
  } catch (err) {
    meter.stop();
    throw err;
  }
}
