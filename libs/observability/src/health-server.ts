import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { RELEASE } from '@tes/core';

export interface HealthServerOptions {
  port: number;
  host?: string;
  /** Where /metrics comes from: a registry, or anything that renders one (a cluster's sum). */
  registry: { metrics(): Promise<string>; readonly contentType: string };
  /** Each resolves true when a dependency the process needs is reachable; ready = all true. */
  checks: (() => Promise<boolean> | boolean)[];
  /**
   * Dependencies the process serves without (degraded, still ready): each is named in /readyz's
   * body while it is down. The gateway's broker: the outbox carries the publish through an outage.
   */
  degraded?: Record<string, () => boolean>;
}

/**
 * Small operations server on METRICS_PORT: /metrics (Prometheus), /healthz (process alive, and its release),
 * /readyz (dependencies reachable). Kept off the public port.
 */
export class HealthServer {
  private server: http.Server | undefined;
  constructor(private readonly options: HealthServerOptions) {}

  async start(): Promise<number> {
    const server = http.createServer((req, res) => {
      void this.handle(req, res);
    });
    this.server = server;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.options.port, this.options.host ?? '0.0.0.0', () => resolve());
    });
    return (server.address() as AddressInfo).port;
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    res.setHeader('Cache-Control', 'no-store');
    try {
      if (req.url === '/metrics') {
        const body = await this.options.registry.metrics();
        res.writeHead(200, { 'Content-Type': this.options.registry.contentType });
        res.end(body);
      } else if (req.url === '/healthz') {
        res.writeHead(200, { 'Content-Type': 'application/json' });
        res.end(JSON.stringify({ status: 'ok', version: RELEASE }));
      } else if (req.url === '/readyz') {
        let ok = true;
        for (const check of this.options.checks) ok = ok && (await check());
        const degraded = Object.entries(this.options.degraded ?? {})
          .filter(([, up]) => !up())
          .map(([name]) => name);
        res.writeHead(ok ? 200 : 503, { 'Content-Type': 'application/json' });
        res.end(JSON.stringify({ status: ok ? 'ready' : 'not_ready', ...(degraded.length ? { degraded } : {}) }));
      } else {
        res.writeHead(404, { 'Content-Type': 'application/json' });
        res.end('{"error":{"status":"NOT_FOUND","message":"route_not_found"}}');
      }
    } catch {
      res.writeHead(503, { 'Content-Type': 'application/json' });
      res.end('{"status":"not_ready"}');
    }
  }

  async stop(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    if (!server) return;
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}
