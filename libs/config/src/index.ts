import { isIP } from 'node:net';

export { dbTimeoutsFor, type DbRole } from './db-timeouts';

/**
 * Typed configuration, read from the environment once at boot and frozen.
 * Every invalid variable is reported in one error so an operator fixes them in one go.
 * Units are in the names (…_MS, …_SECONDS).
 */
export interface Config {
  readonly nodeEnv: string;
  readonly port: number;
  /**
   * Which peers may tell the gateway the client's address in X-Forwarded-For (Express's
   * 'trust proxy'): false (the default: the socket's peer is the client, the header is
   * ignored), a count of proxy hops, or the proxies' addresses and subnets (or the names
   * loopback, linklocal, uniquelocal).
   */
  readonly trustProxy: false | number | readonly string[];
  readonly metricsPort: number;
  /** OTLP/HTTP collector base URL (spans go to `<it>/v1/traces`); null (unset or empty): tracing off (libs/tracing). */
  readonly otelExporterOtlpEndpoint: string | null;
  readonly databaseUrl: string;
  readonly dbPoolMax: number;
  /**
   * Bounds on every wait in Postgres, set on each pooled connection (dbTimeoutsFor): a
   * statement's run, a lock's wait, a transaction left idle. null (the variable unset): the
   * process's role's default (DB_TIMEOUT_DEFAULTS); 0: none.
   */
  readonly dbTimeouts: {
    readonly statementTimeoutMs: number | null;
    readonly lockTimeoutMs: number | null;
    readonly idleInTransactionTimeoutMs: number | null;
  };
  /** Gateway processes sharing PORT (node:cluster); 1 = the process itself serves. */
  readonly gatewayProcesses: number;
  /** Uploads one gateway process reads at once (each holds up to ~4× its 16 MiB body in memory). */
  readonly uploadConcurrency: number;
  /** An upload body slower than this (after 2 s) is cut, so trickled bodies cannot hold the slots. */
  readonly uploadMinBytesPerSecond: number;
  /**
   * How long an upload may hold its slot while its body is still arriving once a project with
   * no upload in flight is waiting for one: past it, the longest-held such upload is cut (503)
   * and its slot given to the waiting project (UploadSlots), so no set of projects can keep the
   * slots by trickling just above the floor.
   */
  readonly uploadSlotTurnMs: number;
  /**
   * Held connections (event streams and `Prefer: wait` requests) per gateway process: at most
   * `perProcess` in all, `perOrganization` for the projects of one organization together and
   * `perProject` for one project (HeldConnections). Counted in memory per process (replica).
   */
  readonly heldConnections: {
    readonly perProcess: number;
    readonly perOrganization: number;
    readonly perProject: number;
  };
  /**
   * One AMQP URL, or the nodes of a RabbitMQ cluster comma-separated (tried in turn by
   * @tes/messaging's AmqpClient, which splits them before each `scheme://`).
   */
  readonly amqpUrl: string;
  /** Prefix for every exchange and queue name, so test files and stacks can share a broker. */
  readonly amqpPrefix: string;
  readonly s3: {
    readonly endpoint: string;
    readonly publicEndpoint: string;
    readonly bucket: string;
    readonly region: string;
    readonly accessKeyId: string;
    readonly secretAccessKey: string;
    /** Connecting to the object store, per attempt. */
    readonly connectTimeoutMs: number;
    /** One request's whole exchange (a 12 MiB upload's bytes included), per attempt. */
    readonly requestTimeoutMs: number;
  };
  readonly workerQueues: readonly string[];
  readonly workerConcurrency: number;
  /** Per-category concurrency from WORKER_QUEUES entries like `video:1` (else workerConcurrency). */
  readonly workerConcurrencyByQueue: Readonly<Record<string, number>>;
  /**
   * The share of a category's live worker slots one project, or one organization, may hold by
   * default (at least one slot); operators override it per project (admin projects set-limit).
   */
  readonly projectSlotShare: number;
  readonly enableTestTools: boolean;
  readonly rateLimitPerMinute: number;
  readonly logLevel: string;
  readonly leaseTtlMs: number;
  /** The longest one artifact's upload to S3 may take before the step's end is given up. */
  readonly artifactPutTimeoutMs: number;
  readonly presignTtlSeconds: number;
  readonly shutdownTimeoutMs: number;
  readonly settingsCacheTtlMs: number;
  /** How long a gateway may use a key row before reading it again (a revocation takes effect within it). */
  readonly authCacheTtlMs: number;
  readonly usageFlushIntervalMs: number;
  /** Share of successful requests (status < 400) the gateway's access log writes, 0..1; refusals and errors are always written. */
  readonly accessLogSample: number;
  readonly outboxSweepIntervalMs: number;
  readonly outboxGraceMs: number;
  /**
   * A queued execution nobody claimed by then has its message published again by the relay
   * (its message may have been lost: a purged queue, a failed node); later re-publications
   * come at intervals that grow with its age, up to 30 minutes.
   */
  readonly dispatchDeadlineMs: number;
  readonly janitorIntervalMs: number;
  /**
   * The relay's retention of operational tables (docs/storage.md): every `intervalMs` it deletes
   * rows past their horizon, `batchSize` rows per statement. Horizons from
   * OUTBOX_RETENTION_HOURS, WEBHOOK_DELIVERY_RETENTION_DAYS, RATE_LIMIT_RETENTION_MINUTES and
   * USAGE_RETENTION_MONTHS (the current month included).
   */
  readonly retention: {
    readonly intervalMs: number;
    readonly batchSize: number;
    readonly outboxMs: number;
    readonly webhookDeliveriesMs: number;
    readonly rateLimitsMs: number;
    readonly usageMonths: number;
  };
  /** One object delete by the janitor, retries included; a row claimed for deletion waits at most this and a margin. */
  readonly janitorDeleteTimeoutMs: number;
  readonly stateMetricsIntervalMs: number;
  readonly ledgerAuditIntervalMs: number;
  /** Delay between polls of a provider job while an execution is waiting. */
  readonly waitRecheckMs: number;
  /** Allow provider traffic to loopback and private addresses (tests with local fakes only). */
  readonly providerAllowPrivateNetworks: boolean;
  readonly providerJobTimeoutMs: number;
  /** Allow webhook deliveries to loopback and private addresses (off in production; `npm start` turns it on). */
  readonly webhookAllowPrivate: boolean;
  /**
   * One delivery attempt's whole deadline: connect, send, the answer's headers and its whole
   * body, however slowly the receiver trickles it (not an idle timeout). The claim lease is
   * twice this plus 5 s, so an attempt always ends before its delivery can be claimed again.
   */
  readonly webhookTimeoutMs: number;
  /** Deliveries one relay sends at once: at most a quarter of them for one project, half for one organization. */
  readonly webhookConcurrency: number;
  /**
   * Delays before each retry of a failed delivery; after the last the delivery is failed.
   * Default 1 s, 5 s, 30 s, 2 min, 10 min, 30 min, 1 h, 2 h, 4 h, 8 h, 8 h, 8 h (32 h in all).
   */
  readonly webhookRetryDelaysMs: readonly number[];
  /** `falApi`: fal's platform API (model metadata, read by `admin models check`), apart from its queue. */
  readonly providerBaseUrls: { readonly replicate: string; readonly fal: string; readonly openai: string; readonly falApi: string };
  /**
   * MODEL_RETIREMENTS: retirement dates an operator sets or moves ("tool:model" -> the first
   * UTC day the model is refused, YYYY-MM-DD), over the catalog's own, for a provider's notice
   * that came after the release. E.g. "audio.speech:openai/gpt-4o-mini-tts=2027-01-06".
   */
  readonly modelRetirements: Readonly<Record<string, string>>;
  readonly providers: {
    readonly replicateApiToken: string | undefined;
    readonly openaiApiKey: string | undefined;
    readonly falKey: string | undefined;
  };
}

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n  - ${problems.join('\n  - ')}`);
    this.name = 'ConfigError';
  }
}

export const DEFAULTS = {
  PORT: 8080,
  METRICS_PORT: 9464,
  DATABASE_URL: 'postgres://postgres@127.0.0.1:5432/tes',
  AMQP_URL: 'amqp://guest:guest@127.0.0.1:5672',
  S3_ENDPOINT: 'http://127.0.0.1:4568',
  S3_BUCKET: 'tes-artifacts',
  S3_REGION: 'us-east-1',
  // the embedded development server's fixed credentials; set real ones in production
  S3_ACCESS_KEY_ID: 'S3RVER',
  S3_SECRET_ACCESS_KEY: 'S3RVER',
  WORKER_QUEUES: 'image,audio,video,test',
} as const;

export type Env = Record<string, string | undefined>;

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
/** Standard Webhooks-like: quick retries for a blip, then hours apart, for more than a day. */
export const DEFAULT_WEBHOOK_RETRY_DELAYS_MS: readonly number[] = [
  1_000,
  5_000,
  30_000,
  2 * MINUTE,
  10 * MINUTE,
  30 * MINUTE,
  HOUR,
  2 * HOUR,
  4 * HOUR,
  8 * HOUR,
  8 * HOUR,
  8 * HOUR,
];

/**
 * The nodes an AMQP_URL names: one URL, or a cluster's comma-separated, split only before a
 * `scheme://` so a comma in a password survives (@tes/messaging's AmqpClient splits the same way).
 */
export function splitAmqpUrls(raw: string): string[] {
  return raw
    .split(/,(?=\s*[a-z][a-z0-9+.-]*:\/\/)/i)
    .map((u) => u.trim())
    .filter(Boolean);
}

export function loadConfig(env: Env = process.env): Config {
  const problems: string[] = [];

  const str = (name: string, fallback?: string): string => {
    const v = env[name];
    if (v === undefined || v === '') {
      if (fallback === undefined) {
        problems.push(`${name} is required`);
        return '';
      }
      return fallback;
    }
    return v;
  };
  const int = (name: string, fallback: number, min: number, max: number): number => {
    const raw = env[name];
    if (raw === undefined || raw === '') return fallback;
    if (!/^\d+$/.test(raw)) {
      problems.push(`${name} must be a whole number, got "${raw}"`);
      return fallback;
    }
    const n = Number(raw);
    if (n < min || n > max) problems.push(`${name} must be between ${min} and ${max}, got ${n}`);
    return n;
  };
  /** A whole number, or null when the variable is unset (the caller has a default of its own). */
  const optionalInt = (name: string, min: number, max: number): number | null => {
    const raw = env[name];
    if (raw === undefined || raw === '') return null;
    return int(name, min, min, max);
  };
  const bool = (name: string, fallback: boolean): boolean => {
    const raw = env[name];
    if (raw === undefined || raw === '') return fallback;
    if (['1', 'true', 'yes'].includes(raw.toLowerCase())) return true;
    if (['0', 'false', 'no'].includes(raw.toLowerCase())) return false;
    problems.push(`${name} must be 1/0 or true/false, got "${raw}"`);
    return fallback;
  };
  /** A number from 0 to 1 (a share), decimal. */
  const fraction = (name: string, fallback: number): number => {
    const raw = env[name];
    if (raw === undefined || raw === '') return fallback;
    const n = /^(0|1|0?\.\d+|1\.0*)$/.test(raw) ? Number(raw) : NaN;
    if (!(n >= 0 && n <= 1)) {
      problems.push(`${name} must be a number from 0 to 1, got "${raw}"`);
      return fallback;
    }
    return n;
  };
  /** A share of a whole: more than 0, at most 1. */
  const share = (name: string, fallback: number): number => {
    const n = fraction(name, fallback);
    if (n > 0) return n;
    problems.push(`${name} must be more than 0 (a project with no share could never run), got "${env[name]}"`);
    return fallback;
  };
  /** A comma-separated list of 1 to 30 delays in ms, each from 100 ms to 24 h. */
  const delays = (name: string, fallback: readonly number[]): readonly number[] => {
    const raw = env[name];
    if (raw === undefined || raw.trim() === '') return fallback;
    const parts = raw.split(',').map((p) => p.trim());
    if (parts.length > 30 || parts.some((p) => !/^\d+$/.test(p) || Number(p) < 100 || Number(p) > 24 * HOUR)) {
      problems.push(`${name} must be 1 to 30 comma-separated delays in ms, each from 100 to ${24 * HOUR}, got "${raw}"`);
      return fallback;
    }
    return parts.map(Number);
  };
  /** "tool:model=YYYY-MM-DD" pairs, comma-separated; the catalog checks that each model exists. */
  const retirements = (name: string): Record<string, string> => {
    const out: Record<string, string> = {};
    for (const entry of (env[name] ?? '')
      .split(',')
      .map((e) => e.trim())
      .filter(Boolean)) {
      const m = /^([a-z0-9.]+:[^=\s]+)=(\d{4}-\d{2}-\d{2})$/.exec(entry);
      if (!m || Number.isNaN(Date.parse(`${m[2]}T00:00:00Z`))) problems.push(`${name}: "${entry}" is not tool:model=YYYY-MM-DD`);
      else out[m[1]!] = m[2]!;
    }
    return out;
  };
  const url = (name: string, fallback: string, protocols: string[]): string => {
    const v = str(name, fallback);
    try {
      const u = new URL(v);
      if (!protocols.includes(u.protocol)) problems.push(`${name} must use ${protocols.join(' or ')}, got ${u.protocol}`);
    } catch {
      problems.push(`${name} is not a URL`);
    }
    return v;
  };

  /** AMQP_URL: one URL or several comma-separated (a cluster's nodes), each checked; kept as given, trimmed. */
  const amqpUrls = (name: string): string => {
    const urls = splitAmqpUrls(str(name, DEFAULTS.AMQP_URL));
    if (urls.length === 0) problems.push(`${name} names no URL`);
    for (const [i, u] of urls.entries()) {
      const which = urls.length > 1 ? `${name} (URL ${i + 1} of ${urls.length})` : name;
      try {
        const { protocol } = new URL(u);
        if (protocol !== 'amqp:' && protocol !== 'amqps:') problems.push(`${which} must use amqp: or amqps:, got ${protocol}`);
      } catch {
        problems.push(`${which} is not a URL`);
      }
    }
    return urls.join(',');
  };

  const logLevel = str('LOG_LEVEL', 'info');
  if (!['error', 'warn', 'info', 'http', 'verbose', 'debug', 'silly'].includes(logLevel)) {
    problems.push(`LOG_LEVEL must be one of error, warn, info, http, verbose, debug, silly; got "${logLevel}"`);
  }
  const s3Endpoint = url('S3_ENDPOINT', DEFAULTS.S3_ENDPOINT, ['http:', 'https:']);
  // WORKER_QUEUES: categories, each optionally with its own concurrency (`image:4,video:1`),
  // so heavy video work and light image work scale apart.
  const workerQueues: string[] = [];
  const workerConcurrencyByQueue: Record<string, number> = {};
  for (const entry of str('WORKER_QUEUES', DEFAULTS.WORKER_QUEUES)
    .split(',')
    .map((q) => q.trim())
    .filter(Boolean)) {
    const [name, concurrency] = entry.split(':') as [string, string | undefined];
    if (!/^[a-z][a-z0-9-]*$/.test(name)) problems.push(`WORKER_QUEUES has an invalid category "${name}"`);
    if (concurrency !== undefined) {
      if (!/^\d+$/.test(concurrency) || Number(concurrency) < 1 || Number(concurrency) > 256) {
        problems.push(`WORKER_QUEUES: concurrency of "${name}" must be a whole number from 1 to 256`);
      } else workerConcurrencyByQueue[name] = Number(concurrency);
    }
    workerQueues.push(name);
  }
  if (workerQueues.length === 0) problems.push('WORKER_QUEUES must name at least one category');
  const trustProxy = parseTrustProxy(env.TRUST_PROXY, problems);
  const amqpPrefix = str('AMQP_PREFIX', '');
  if (amqpPrefix && !/^[a-z0-9_.-]+$/i.test(amqpPrefix)) problems.push('AMQP_PREFIX may hold letters, digits, . _ - only');

  const heldConnections = {
    perProcess: int('HELD_CONNECTIONS_PER_PROCESS', 2_000, 2, 1_000_000),
    perOrganization: int('HELD_CONNECTIONS_PER_ORGANIZATION', 400, 1, 1_000_000),
    perProject: int('HELD_CONNECTIONS_PER_PROJECT', 200, 1, 1_000_000),
  };
  // One organization (and so one project) never holds more than half of a process's held
  // connections, so the rest is there for the others before any has to be preempted.
  if (heldConnections.perProject > heldConnections.perOrganization) {
    problems.push(
      `HELD_CONNECTIONS_PER_PROJECT (${heldConnections.perProject}) must not exceed HELD_CONNECTIONS_PER_ORGANIZATION (${heldConnections.perOrganization})`,
    );
  }
  if (heldConnections.perOrganization > Math.floor(heldConnections.perProcess / 2)) {
    problems.push(
      `HELD_CONNECTIONS_PER_ORGANIZATION (${heldConnections.perOrganization}) must be at most half of HELD_CONNECTIONS_PER_PROCESS (${heldConnections.perProcess})`,
    );
  }

  const config: Config = {
    nodeEnv: str('NODE_ENV', 'development'),
    port: int('PORT', DEFAULTS.PORT, 0, 65535),
    trustProxy,
    metricsPort: int('METRICS_PORT', DEFAULTS.METRICS_PORT, 0, 65535),
    otelExporterOtlpEndpoint: env.OTEL_EXPORTER_OTLP_ENDPOINT ? url('OTEL_EXPORTER_OTLP_ENDPOINT', '', ['http:', 'https:']) : null,
    databaseUrl: url('DATABASE_URL', DEFAULTS.DATABASE_URL, ['postgres:', 'postgresql:']),
    dbPoolMax: int('DB_POOL_MAX', 10, 1, 500),
    dbTimeouts: {
      statementTimeoutMs: optionalInt('DB_STATEMENT_TIMEOUT_MS', 0, 24 * HOUR),
      lockTimeoutMs: optionalInt('DB_LOCK_TIMEOUT_MS', 0, HOUR),
      idleInTransactionTimeoutMs: optionalInt('DB_IDLE_IN_TRANSACTION_TIMEOUT_MS', 0, HOUR),
    },
    gatewayProcesses: int('GATEWAY_PROCESSES', 1, 1, 64),
    uploadConcurrency: int('UPLOAD_CONCURRENCY', 2, 1, 64),
    uploadMinBytesPerSecond: int('UPLOAD_MIN_BYTES_PER_SECOND', 32 * 1024, 0, 1024 ** 3),
    uploadSlotTurnMs: int('UPLOAD_SLOT_TURN_MS', 60_000, 500, 3_600_000),
    heldConnections,
    amqpUrl: amqpUrls('AMQP_URL'),
    amqpPrefix,
    s3: {
      endpoint: s3Endpoint,
      publicEndpoint: url('S3_PUBLIC_ENDPOINT', s3Endpoint, ['http:', 'https:']),
      bucket: str('S3_BUCKET', DEFAULTS.S3_BUCKET),
      region: str('S3_REGION', DEFAULTS.S3_REGION),
      accessKeyId: str('S3_ACCESS_KEY_ID', DEFAULTS.S3_ACCESS_KEY_ID),
      secretAccessKey: str('S3_SECRET_ACCESS_KEY', DEFAULTS.S3_SECRET_ACCESS_KEY),
      connectTimeoutMs: int('S3_CONNECT_TIMEOUT_MS', 3_000, 100, 60_000),
      requestTimeoutMs: int('S3_REQUEST_TIMEOUT_MS', 60_000, 1_000, 600_000),
    },
    workerQueues,
    workerConcurrency: int('WORKER_CONCURRENCY', 4, 1, 256),
    workerConcurrencyByQueue,
    projectSlotShare: share('PROJECT_SLOT_SHARE', 0.5),
    enableTestTools: bool('ENABLE_TEST_TOOLS', false),
    rateLimitPerMinute: int('RATE_LIMIT_PER_MINUTE', 120, 1, 10_000_000),
    logLevel,
    leaseTtlMs: int('LEASE_TTL_MS', 30_000, 1_000, 3_600_000),
    artifactPutTimeoutMs: int('ARTIFACT_PUT_TIMEOUT_MS', 120_000, 1_000, 3_600_000),
    presignTtlSeconds: int('PRESIGN_TTL_SECONDS', 300, 1, 300),
    // up to 20 min: a worker's drain waits up to 15 min for a running step (deploy/README.md)
    shutdownTimeoutMs: int('SHUTDOWN_TIMEOUT_MS', 25_000, 0, 1_200_000),
    settingsCacheTtlMs: int('SETTINGS_CACHE_TTL_MS', 2_000, 0, 60_000),
    authCacheTtlMs: int('AUTH_CACHE_TTL_MS', 5_000, 0, 5_000),
    usageFlushIntervalMs: int('USAGE_FLUSH_INTERVAL_MS', 1_000, 10, 60_000),
    accessLogSample: fraction('ACCESS_LOG_SAMPLE', 1),
    outboxSweepIntervalMs: int('OUTBOX_SWEEP_INTERVAL_MS', 1_000, 50, 60_000),
    outboxGraceMs: int('OUTBOX_GRACE_MS', 5_000, 0, 600_000),
    dispatchDeadlineMs: int('DISPATCH_DEADLINE_MS', 60_000, 100, 3_600_000),
    janitorIntervalMs: int('JANITOR_INTERVAL_MS', 60_000, 100, 86_400_000),
    retention: {
      intervalMs: int('RETENTION_INTERVAL_MS', 60_000, 100, 86_400_000),
      batchSize: int('RETENTION_BATCH_SIZE', 500, 1, 10_000),
      outboxMs: int('OUTBOX_RETENTION_HOURS', 24, 1, 24 * 365) * HOUR,
      webhookDeliveriesMs: int('WEBHOOK_DELIVERY_RETENTION_DAYS', 7, 1, 3_650) * 24 * HOUR,
      rateLimitsMs: int('RATE_LIMIT_RETENTION_MINUTES', 60, 1, 7 * 24 * 60) * MINUTE,
      // at least the current and the previous month: a month's last settles and flushes land at its end
      usageMonths: int('USAGE_RETENTION_MONTHS', 13, 2, 1_200),
    },
    janitorDeleteTimeoutMs: int('JANITOR_DELETE_TIMEOUT_MS', 10_000, 100, 600_000),
    stateMetricsIntervalMs: int('STATE_METRICS_INTERVAL_MS', 10_000, 100, 3_600_000),
    ledgerAuditIntervalMs: int('LEDGER_AUDIT_INTERVAL_MS', 60_000, 100, 86_400_000),
    waitRecheckMs: int('WAIT_RECHECK_MS', 5_000, 50, 600_000),
    providerAllowPrivateNetworks: bool('PROVIDER_ALLOW_PRIVATE_NETWORKS', false),
    providerJobTimeoutMs: int('PROVIDER_JOB_TIMEOUT_MS', 30 * 60_000, 100, 24 * 3_600_000),
    webhookAllowPrivate: bool('WEBHOOK_ALLOW_PRIVATE', false),
    webhookTimeoutMs: int('WEBHOOK_TIMEOUT_MS', 10_000, 100, 60_000),
    webhookConcurrency: int('WEBHOOK_CONCURRENCY', 16, 1, 1_000),
    webhookRetryDelaysMs: delays('WEBHOOK_RETRY_DELAYS_MS', DEFAULT_WEBHOOK_RETRY_DELAYS_MS),
    providerBaseUrls: {
      replicate: url('REPLICATE_BASE_URL', 'https://api.replicate.com/v1', ['https:', 'http:']),
      fal: url('FAL_QUEUE_URL', 'https://queue.fal.run', ['https:', 'http:']),
      openai: url('OPENAI_BASE_URL', 'https://api.openai.com/v1', ['https:', 'http:']),
      falApi: url('FAL_API_URL', 'https://api.fal.ai/v1', ['https:', 'http:']),
    },
    modelRetirements: retirements('MODEL_RETIREMENTS'),
    providers: {
      replicateApiToken: env.REPLICATE_API_TOKEN || undefined,
      openaiApiKey: env.OPENAI_API_KEY || undefined,
      falKey: env.FAL_KEY || undefined,
    },
  };
  if (problems.length > 0) throw new ConfigError(problems);
  return deepFreeze(config);
}

const PROXY_NAMES = ['loopback', 'linklocal', 'uniquelocal'];

/**
 * TRUST_PROXY: unset, 0 or false → false; a whole number → that many proxy hops; otherwise a
 * comma-separated list of addresses, CIDR subnets and the names above. `true` is refused:
 * it would take the left-most X-Forwarded-For entry, which any client can write.
 */
function parseTrustProxy(raw: string | undefined, problems: string[]): false | number | string[] {
  const v = raw?.trim() ?? '';
  if (v === '' || ['0', 'false', 'no'].includes(v.toLowerCase())) return false;
  if (/^\d+$/.test(v)) {
    const hops = Number(v);
    if (hops > 10) problems.push(`TRUST_PROXY must be a hop count from 1 to 10 or proxy addresses, got ${hops}`);
    return hops;
  }
  if (['true', 'yes'].includes(v.toLowerCase())) {
    problems.push('TRUST_PROXY=true would believe any X-Forwarded-For a client writes: give the number of proxies in front of the gateway, or their addresses');
    return false;
  }
  const entries = v
    .split(',')
    .map((e) => e.trim())
    .filter(Boolean);
  for (const e of entries) {
    const [address, prefix, extra] = e.split('/');
    const family = isIP(address ?? '');
    const prefixOk = prefix === undefined || (/^\d+$/.test(prefix) && Number(prefix) <= (family === 6 ? 128 : 32));
    const ok = extra === undefined && ((PROXY_NAMES.includes(e) && prefix === undefined) || (family !== 0 && prefixOk));
    if (!ok) problems.push(`TRUST_PROXY: "${e}" is not an IP address, a CIDR subnet or one of ${PROXY_NAMES.join(', ')}`);
  }
  return entries;
}

function deepFreeze<T>(obj: T): T {
  if (obj && typeof obj === 'object') {
    for (const v of Object.values(obj)) deepFreeze(v);
    Object.freeze(obj);
  }
  return obj;
}

/** Which provider credentials are configured (the catalog offers those models only). */
export function providerAvailability(config: Config): { replicate: boolean; fal: boolean; openai: boolean } {
  return { replicate: !!config.providers.replicateApiToken, fal: !!config.providers.falKey, openai: !!config.providers.openaiApiKey };
}
