import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
// eslint-disable-next-line @typescript-eslint/no-require-imports
const S3rver = require('@20minutes/s3rver') as new (options: Record<string, unknown>) => {
  run(): Promise<AddressInfo>;
  httpServer?: Server;
  close(): Promise<void>;
};

export interface EmbeddedS3 {
  endpoint: string;
  accessKeyId: string;
  secretAccessKey: string;
  stop(): Promise<void>;
}

/**
 * An in-process S3-compatible server (@20minutes/s3rver) that verifies SigV4 signatures,
 * so forged, tampered and expired presigned URLs are refused (403) as on real S3.
 */
export async function startEmbeddedS3(options: { port?: number; address?: string; directory?: string } = {}): Promise<EmbeddedS3> {
  const directory = options.directory ?? (await mkdtemp(path.join(os.tmpdir(), 'tes-s3-')));
  const server = new S3rver({
    address: options.address ?? '127.0.0.1',
    port: options.port ?? 0,
    silent: true,
    directory,
    allowMismatchedSignatures: false,
  });
  const addr = await server.run();
  return {
    endpoint: `http://127.0.0.1:${addr.port}`,
    accessKeyId: 'S3RVER',
    secretAccessKey: 'S3RVER',
    stop: async () => {
      server.httpServer?.closeAllConnections();
      await server.close().catch(() => undefined);
      if (!options.directory) await rm(directory, { recursive: true, force: true });
    },
  };
}
