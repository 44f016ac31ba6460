import net from 'node:net';

/**
 * True when nothing listens on `port`. Listens the way the services do (all interfaces,
 * IPv6 and IPv4) so a server bound to 127.0.0.1 only is noticed too.
 */
export function isPortFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', () => resolve(false));
    server.listen({ port, exclusive: true }, () => server.close(() => resolve(true)));
  });
}

/**
 * A port the OS says is free on 127.0.0.1 now. It is only a hint: another process may take
 * it before we do, in which case the server using it fails to start and says so.
 */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
