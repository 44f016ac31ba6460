import {
  CreateBucketCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  HeadBucketCommand,
  PutObjectCommand,
  S3Client,
  type S3ClientConfig,
} from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';

export interface StorageOptions {
  endpoint: string;
  /** Host clients reach for downloads; presigned URLs are signed for it. */
  publicEndpoint: string;
  bucket: string;
  region: string;
  accessKeyId: string;
  secretAccessKey: string;
  /** Connecting, per attempt (S3_CONNECT_TIMEOUT_MS); default 3 s. */
  connectTimeoutMs?: number;
  /** One request's whole exchange, body included, per attempt (S3_REQUEST_TIMEOUT_MS); default 60 s. */
  requestTimeoutMs?: number;
}

function clientConfig(endpoint: string, o: StorageOptions): S3ClientConfig {
  return {
    endpoint,
    region: o.region,
    forcePathStyle: true,
    credentials: { accessKeyId: o.accessKeyId, secretAccessKey: o.secretAccessKey },
    // SDK 3.11xx defaults would frame streamed uploads as aws-chunked, which S3-compatible
    // servers store corrupt or reject (infrastructure notes): only checksum when required.
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
    maxAttempts: 3,
    // Every request is bounded: a store that accepts the connection and never answers fails the
    // attempt (TimeoutError, retried up to maxAttempts) instead of holding its caller for good.
    // A caller with a tighter bound for the whole call (retries included) passes an abortSignal.
    requestHandler: {
      connectionTimeout: o.connectTimeoutMs ?? 3_000,
      requestTimeout: o.requestTimeoutMs ?? 60_000,
      throwOnRequestTimeout: true,
    },
  };
}

/**
 * Bucket-level requests are signed for `/bucket/` but some S3-compatible servers (s3rver)
 * canonicalise `/bucket`; signing the path without the trailing slash is accepted by both.
 */
function stripBucketTrailingSlash(client: S3Client): void {
  client.middlewareStack.add(
    (next) => async (args) => {
      const req = args.request as { path?: string };
      if (req && typeof req.path === 'string' && /^\/[^/]+\/$/.test(req.path)) req.path = req.path.slice(0, -1);
      return next(args);
    },
    { step: 'build', name: 'stripBucketTrailingSlash' },
  );
}

export interface PutOptions {
  key: string;
  body: Buffer;
  contentType: string;
  signal?: AbortSignal | undefined;
}

export interface PresignOptions {
  key: string;
  /** The longest the URL may work, in seconds. */
  maxSeconds: number;
  /** The URL must stop working by then (the object's own end of life). */
  notAfter: Date;
  contentType: string;
  fileName: string;
}

export interface PresignedGet {
  url: string;
  /** When the URL stops working: never after `notAfter`. */
  expiresAt: Date;
  ttlSeconds: number;
}

/** Private object storage: the only thing clients ever see is a short-lived presigned GET. */
export class ObjectStore {
  readonly bucket: string;
  private readonly client: S3Client;
  private readonly publicClient: S3Client;

  constructor(options: StorageOptions) {
    this.bucket = options.bucket;
    this.client = new S3Client(clientConfig(options.endpoint, options));
    this.publicClient = options.publicEndpoint === options.endpoint ? this.client : new S3Client(clientConfig(options.publicEndpoint, options));
    stripBucketTrailingSlash(this.client);
    if (this.publicClient !== this.client) stripBucketTrailingSlash(this.publicClient);
  }

  /** Creates the bucket when missing (development and tests; production buckets are provisioned). */
  async ensureBucket(): Promise<void> {
    try {
      await this.client.send(new HeadBucketCommand({ Bucket: this.bucket }));
    } catch {
      try {
        await this.client.send(new CreateBucketCommand({ Bucket: this.bucket }));
      } catch (err) {
        const name = (err as { name?: string }).name;
        if (name !== 'BucketAlreadyOwnedByYou' && name !== 'BucketAlreadyExists') throw err;
      }
    }
  }

  async ping(): Promise<boolean> {
    try {
      await this.client.send(new HeadBucketCommand({ Bucket: this.bucket }));
      return true;
    } catch {
      return false;
    }
  }

  async put(o: PutOptions): Promise<void> {
    await this.client.send(
      new PutObjectCommand({ Bucket: this.bucket, Key: o.key, Body: o.body, ContentType: o.contentType, ContentLength: o.body.length }),
      o.signal ? { abortSignal: o.signal } : {},
    );
  }

  async get(key: string, signal?: AbortSignal): Promise<Buffer> {
    const res = await this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: key }), signal ? { abortSignal: signal } : {});
    if (!res.Body) throw new Error(`object ${key} has no body`);
    return Buffer.from(await res.Body.transformToByteArray());
  }

  /** Deletes an object (none there is no error); `signal` bounds the whole call, retries included. */
  async delete(key: string, signal?: AbortSignal): Promise<void> {
    await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: key }), signal ? { abortSignal: signal } : {});
  }

  /**
   * A GET URL that works for at most `maxSeconds` and never after `notAfter`, carries no API
   * key, serves the exact content type as an attachment and tells every cache not to keep the
   * bytes (`Cache-Control: private, no-store`, an override the signature covers). Null when
   * less than a second is left before `notAfter`. SigV4 counts whole seconds from a signing
   * time truncated to the second, so the URL is signed at that truncated time and its
   * lifetime cut to end at or before `notAfter` (with a second left, it is at least 1 s).
   */
  async presignGet(o: PresignOptions): Promise<PresignedGet | null> {
    const now = Date.now();
    if (!(o.notAfter.getTime() - now >= 1000)) return null;
    const signedAtSeconds = Math.floor(now / 1000);
    const ttlSeconds = Math.min(o.maxSeconds, Math.floor(o.notAfter.getTime() / 1000 - signedAtSeconds));
    const safeName = o.fileName.replace(/[^A-Za-z0-9._-]/g, '_');
    const url = await getSignedUrl(
      this.publicClient,
      new GetObjectCommand({
        Bucket: this.bucket,
        Key: o.key,
        ResponseContentType: o.contentType,
        ResponseContentDisposition: `attachment; filename="${safeName}"`,
        ResponseCacheControl: 'private, no-store',
      }),
      { expiresIn: ttlSeconds, signingDate: new Date(signedAtSeconds * 1000) },
    );
    return { url, expiresAt: new Date((signedAtSeconds + ttlSeconds) * 1000), ttlSeconds };
  }

  close(): void {
    this.client.destroy();
    if (this.publicClient !== this.client) this.publicClient.destroy();
  }
}

/**
 * Where an upload's bytes go: by content, and for a record revived after it expired, with a
 * suffix of that life's own (`generation`), so a delete of an earlier life's object that lands
 * late never removes the revived one's (recordUpload).
 */
export function uploadKey(projectId: string, sha256: string, generation?: string): string {
  return `projects/${projectId}/uploads/${sha256}${generation ? `.${generation}` : ''}`;
}

export function artifactKey(projectId: string, executionId: string, artifactId: string, ext: string): string {
  return `projects/${projectId}/executions/${executionId}/${artifactId}.${ext}`;
}
export { probeUpload, type UploadProbe } from './probe';
