import winston from 'winston';

export type Logger = winston.Logger;

/** Field names whose values never reach a transport. */
const SECRET_FIELDS = new Set([
  'authorization',
  'secret',
  'apikey',
  'api_key',
  'password',
  'token',
  'url',
  'downloadurl',
  'data',
  'body',
  'bytes',
  'secretaccesskey',
]);

const KEY_SECRET = /tes_[0-9A-Za-z]{8}_[0-9A-Za-z]{32}/g;
const BEARER = /Bearer\s+[^\s"']+/gi;
// Any URL carrying a SigV4 query signature is a presigned URL: access to private data.
const PRESIGNED_URL = /https?:\/\/[^\s"']*X-Amz-(Signature|Credential)=[^\s"']*/gi;

/** Replace secrets inside free text. */
function redactText(text: string): string {
  return text.replace(PRESIGNED_URL, '[redacted-url]').replace(KEY_SECRET, '[redacted-key]').replace(BEARER, 'Bearer [redacted]');
}

/** Deep copy with secret fields and secret-looking strings replaced. */
function redactValue(value: unknown, depth = 0): unknown {
  if (depth > 8) return '[truncated]';
  if (typeof value === 'string') return redactText(value);
  if (ArrayBuffer.isView(value)) return `[${value.byteLength} bytes]`;
  if (value instanceof ArrayBuffer) return `[${value.byteLength} bytes]`;
  if (Array.isArray(value)) return value.map((v) => redactValue(v, depth + 1));
  if (value instanceof Error) {
    return { name: value.name, message: redactText(value.message), stack: value.stack ? redactText(value.stack) : undefined };
  }
  if (value && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
      out[k] = SECRET_FIELDS.has(k.toLowerCase()) ? '[redacted]' : redactValue(v, depth + 1);
    }
    return out;
  }
  return value;
}

/**
 * winston format that scrubs every log record before any transport sees it: API keys,
 * bearer tokens, presigned URLs and file contents never leave the process in a log.
 */
const redactFormat = winston.format((info) => {
  // A copy (symbol keys included): when a caller logs one object, winston uses that very
  // object as the record, and redacting in place would change the caller's data.
  const out = Object.assign({}, info) as Record<string, unknown>;
  for (const key of Object.keys(out)) {
    if (key === 'level') continue;
    out[key] = SECRET_FIELDS.has(key.toLowerCase()) ? '[redacted]' : redactValue(out[key]);
  }
  return out as typeof info;
});

export interface LoggerOptions {
  service: string;
  level?: string;
  /** Extra transports (tests capture records with one). Defaults to JSON on stdout. */
  transports?: winston.transport[];
  silent?: boolean;
}

export function createLogger(options: LoggerOptions): Logger {
  const level = options.level ?? 'info';
  const transports = options.transports ?? [new winston.transports.Console()];
  // winston filters by level only at the transports, after every format ran: a record no
  // transport will write is dropped here, before redaction and serialisation cost anything
  const levels = winston.config.npm.levels;
  const threshold = Math.max(levels[level] ?? levels.info, ...transports.map((t) => (t.level ? (levels[t.level] ?? -1) : -1)));
  const wanted = winston.format((info) => ((levels[info.level] ?? 0) <= threshold ? info : false));
  return winston.createLogger({
    level,
    silent: options.silent ?? false,
    defaultMeta: { service: options.service },
    format: winston.format.combine(wanted(), redactFormat(), winston.format.timestamp(), winston.format.json()),
    transports,
  });
}

/** A logger that writes nothing; for unit tests that do not inspect logs. */
export function createNullLogger(): Logger {
  return createLogger({ service: 'null', silent: true });
}
