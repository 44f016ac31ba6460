import { mkdirSync } from 'node:fs';
import { DEFAULTS, loadConfig } from '@tes/config';
import { ObjectStore } from '@tes/storage';
import { startEmbeddedS3 } from '@tes/testing';
import type { Lifecycle } from './lifecycle';
import { DevError, say } from './output';
import type { Settings } from './settings';

/**
 * Object storage for the services. With S3_ENDPOINT unset, an embedded S3-compatible
 * server (s3rver, which like real S3 answers only requests with a valid SigV4 signature)
 * runs inside this process on the services' default endpoint, keeping objects in .data/s3
 * across restarts.
 * Either way the bucket is created when missing. Returns the variables the children need.
 */
export async function prepareStorage(settings: Settings, lifecycle: Lifecycle): Promise<Record<string, string>> {
  const env: Record<string, string> = {};
  if (!settings.explicitS3Endpoint) {
    const endpoint = new URL(DEFAULTS.S3_ENDPOINT);
    const port = Number(endpoint.port);
    mkdirSync(settings.embeddedS3Dir, { recursive: true });
    let s3;
    try {
      s3 = await startEmbeddedS3({ port, address: endpoint.hostname, directory: settings.embeddedS3Dir });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'EADDRINUSE') {
        throw new DevError(`port ${port} (the embedded S3 server) is in use: is another \`npm start\` running? Stop it, or set S3_ENDPOINT to an S3 server.`);
      }
      throw err;
    }
    await lifecycle.add({ name: 'embedded S3', stop: () => s3.stop() });
    // the embedded server only knows the key pair it made for this run
    env.S3_ENDPOINT = s3.endpoint;
    env.S3_ACCESS_KEY_ID = s3.accessKeyId;
    env.S3_SECRET_ACCESS_KEY = s3.secretAccessKey;
    say.info(`S3: embedded server on ${s3.endpoint}, data in ${settings.embeddedS3Dir}`);
  }

  const config = loadConfig({ ...settings.baseEnv, ...env });
  const store = new ObjectStore(config.s3);
  try {
    await store.ensureBucket();
  } catch (err) {
    throw new DevError(`cannot create or reach bucket "${config.s3.bucket}" at ${config.s3.endpoint}: ${(err as Error).message}`);
  } finally {
    store.close();
  }
  say.info(`S3: bucket "${config.s3.bucket}" ready`);
  return env;
}
