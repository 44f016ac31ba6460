import net from 'node:net';

/**
 * A TCP relay in front of a real server (Postgres, RabbitMQ) that a test can disturb the way a
 * network does: hold the requests (bytes wait, nothing is lost), hold the answers, or cut every
 * connection and refuse new ones until restored. The client connects to `url`: the target's
 * URL with the relay's host and port.
 */
export interface TcpRelay {
  url: string;
  /** Client → server bytes wait while on (the server never sees the request). */
  holdRequests(on: boolean): void;
  /** Server → client bytes wait while on (the server answered; the client does not hear it). */
  holdAnswers(on: boolean): void;
  /** Every connection is destroyed and the port stops listening. */
  cut(): Promise<void>;
  /** Listens again on the same port. */
  restore(): Promise<void>;
  /**
   * New connections go to another server from now on, as when a failover moves a virtual IP or
   * a Kubernetes Service to the promoted replica; open ones stay where they are.
   */
  switchTo(targetUrl: string): void;
  close(): Promise<void>;
}

export async function startTcpRelay(targetUrl: string, defaultPort: number): Promise<TcpRelay> {
  let target = new URL(targetUrl);
  const pairs = new Set<{ client: net.Socket; upstream: net.Socket }>();
  const held = { requests: false, answers: false };
  let server = net.createServer();
  const listen = async (port: number): Promise<number> => {
    server = net.createServer((client) => {
      const upstream = net.connect(Number(target.port || defaultPort), target.hostname);
      const pair = { client, upstream };
      pairs.add(pair);
      for (const s of [client, upstream]) s.on('error', () => undefined);
      client.on('close', () => {
        pairs.delete(pair);
        upstream.destroy();
      });
      upstream.on('close', () => {
        pairs.delete(pair);
        client.destroy();
      });
      client.pipe(upstream);
      upstream.pipe(client);
      if (held.requests) client.pause();
      if (held.answers) upstream.pause();
    });
    await new Promise<void>((r) => server.listen(port, '127.0.0.1', () => r()));
    return (server.address() as net.AddressInfo).port;
  };
  const port = await listen(0);
  const url = new URL(targetUrl);
  url.hostname = '127.0.0.1';
  url.port = String(port);
  const cut = () =>
    new Promise<void>((resolve) => {
      server.close(() => resolve());
      for (const { client, upstream } of pairs) {
        client.destroy();
        upstream.destroy();
      }
    });
  return {
    url: url.toString(),
    holdRequests: (on) => {
      held.requests = on;
      for (const { client } of pairs)
        if (on) client.pause();
        else client.resume();
    },
    holdAnswers: (on) => {
      held.answers = on;
      for (const { upstream } of pairs)
        if (on) upstream.pause();
        else upstream.resume();
    },
    cut,
    restore: async () => {
      await listen(port);
    },
    switchTo: (next) => {
      target = new URL(next);
    },
    close: cut,
  };
}
