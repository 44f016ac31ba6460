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

export { freePort } from '@tes/testing';

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
