import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import type { IncomingMessage, Server } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';

interface KoaContext {
  method: string;
  path: string;
  req: IncomingMessage;
  headers: Record<string, string | string[] | undefined>;
  query: Record<string, string | string[] | undefined>;
}
type KoaMiddleware = (ctx: KoaContext, next: () => Promise<unknown>) => Promise<unknown>;

/* eslint-disable @typescript-eslint/no-require-imports */
const S3rver = require('@20minutes/s3rver') as new (options: Record<string, unknown>) => {
  run(): Promise<AddressInfo>;
  httpServer?: Server;
  close(): Promise<void>;
  /** Koa's middleware list; composed when `run()` starts listening. */
  middleware: KoaMiddleware[];
};
// s3rver's own error type: thrown from a middleware, its error handler renders it as S3 XML.
const S3Error = require('@20minutes/s3rver/lib/models/error') as new (code: string, message: string) => Error;
// The process-wide registry of the key pairs s3rver accepts, seeded with S3RVER/S3RVER.
const AWSAccount = require('@20minutes/s3rver/lib/models/account') as {
  DUMMY_ACCOUNT: { createKeyPair(id: string, secret: string): void; revokeAccessKey(id: string): void };
};
/* eslint-enable @typescript-eslint/no-require-imports */

export interface EmbeddedS3 {
  endpoint: string;
  accessKeyId: string;
  secretAccessKey: string;
  /**
   * Fault injection: every object PUT received from now on waits `ms` before it is handled (a
   * slow network or an overloaded S3); one whose client gave up meanwhile is not stored. 0: none.
   */
  delayObjectPuts(ms: number): void;
  /** Object PUTs received so far (whether stored or not; bucket creation is not one). */
  objectPuts(): number;
  stop(): Promise<void>;
}

/** Counts object PUTs and holds each for the delay the test set (see EmbeddedS3.delayObjectPuts). */
function objectPutFaults(): { middleware: KoaMiddleware; delay: (ms: number) => void; count: () => number } {
  let delayMs = 0;
  let puts = 0;
  const middleware: KoaMiddleware = async (ctx, next) => {
    if (ctx.method !== 'PUT' || !/^\/[^/]+\/./.test(ctx.path)) return next();
    puts += 1;
    if (delayMs > 0) {
      await sleep(delayMs);
      // as S3 does with a request whose body never fully arrived: nothing is stored
      if (ctx.req.socket.destroyed) throw new S3Error('RequestTimeout', 'the client went away during the upload');
    }
    return next();
  };
  return { middleware, delay: (ms) => (delayMs = ms), count: () => puts };
}

/**
 * Lets through only requests that claim a SigV4 signature, by the same tests s3rver uses to
 * decide whether to verify one: an `Authorization` header (here: `AWS4-HMAC-SHA256 ...`) or
 * an `X-Amz-Algorithm` query parameter (exact case, here: with `X-Amz-Signature`). s3rver
 * verifies every request that has either (forged, tampered, expired: 403) but serves a
 * request with neither anonymously, so anything this passes is verified and nothing
 * unsigned gets through. OPTIONS is refused too: s3rver skips verification for it (CORS
 * preflights carry no signature), and nothing here needs CORS. (s3rver also skips it for a
 * bucket with a website configuration; creating one takes a signed request.)
 */
const requireSigV4: KoaMiddleware = async (ctx, next) => {
  const authorization = ctx.headers.authorization;
  const byHeader = typeof authorization === 'string' && authorization.startsWith('AWS4-HMAC-SHA256 ');
  const byQuery = ctx.query['X-Amz-Algorithm'] === 'AWS4-HMAC-SHA256' && typeof ctx.query['X-Amz-Signature'] === 'string';
  if (ctx.method === 'OPTIONS' || !(byHeader || byQuery)) throw new S3Error('AccessDenied', 'Access Denied');
  return next();
};

/**
 * An in-process S3-compatible server (@20minutes/s3rver) that answers only SigV4-signed
 * requests: unsigned ones get 403 AccessDenied, forged, tampered and expired signatures
 * (presigned URLs included) 403 as on real S3. Each server signs with a key pair of its own,
 * random, and s3rver's well-known S3RVER/S3RVER pair is revoked: otherwise any local user
 * could sign requests with it and read or replace every project's files.
 */
export async function startEmbeddedS3(options: { port?: number; address?: string; directory?: string } = {}): Promise<EmbeddedS3> {
  const directory = options.directory ?? (await mkdtemp(path.join(os.tmpdir(), 'tes-s3-')));
  const accessKeyId = `TES${randomBytes(8).toString('hex').toUpperCase()}`;
  const secretAccessKey = randomBytes(30).toString('base64url');
  AWSAccount.DUMMY_ACCOUNT.revokeAccessKey('S3RVER');
  AWSAccount.DUMMY_ACCOUNT.createKeyPair(accessKeyId, secretAccessKey);
  const server = new S3rver({
    address: options.address ?? '127.0.0.1',
    port: options.port ?? 0,
    silent: true,
    directory,
    allowMismatchedSignatures: false,
  });
  // first in the chain: before s3rver's router, whose CORS and website handlers run ahead of its signature check
  const faults = objectPutFaults();
  server.middleware.unshift(requireSigV4, faults.middleware);
  let addr: AddressInfo;
  try {
    addr = await server.run();
  } catch (err) {
    AWSAccount.DUMMY_ACCOUNT.revokeAccessKey(accessKeyId);
    if (!options.directory) await rm(directory, { recursive: true, force: true });
    throw err;
  }
  return {
    endpoint: `http://127.0.0.1:${addr.port}`,
    accessKeyId,
    secretAccessKey,
    delayObjectPuts: faults.delay,
    objectPuts: faults.count,
    stop: async () => {
      server.httpServer?.closeAllConnections();
      await server.close().catch(() => undefined);
      AWSAccount.DUMMY_ACCOUNT.revokeAccessKey(accessKeyId);
      if (!options.directory) await rm(directory, { recursive: true, force: true });
    },
  };
}
