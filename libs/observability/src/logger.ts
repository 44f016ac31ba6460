import winston from 'winston';
import { stdoutTransport } from './stdout-transport';
import { traceFields } from './trace-context';

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

// What each pattern above needs to match at all: most text (ids, event names, templates)
// contains none of these, and one test is far cheaper than three replaces.
const MAY_HOLD_SECRET = /tes_|bearer|x-amz-/i;

/** Replace secrets inside free text. */
function redactText(text: string): string {
  if (!MAY_HOLD_SECRET.test(text)) return text;
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

/**
 * winston format that adds the active span's trace_id and span_id (trace-context.ts) to a
 * record that has none: a line written inside a span joins its trace. After redactFormat, on
 * its copy, never on the caller's object.
 */
const traceFormat = winston.format((info) => {
  addTraceIds(info);
  return info;
});

/** Adds the active span's trace_id and span_id to a record that has no trace_id (both paths below). */
function addTraceIds(record: Record<string, unknown>): void {
  if (record.trace_id !== undefined) return;
  const ids = traceFields();
  if (ids.trace_id !== undefined) {
    record.trace_id = ids.trace_id;
    record.span_id = ids.span_id;
  }
}

export interface LoggerOptions {
  service: string;
  level?: string;
  /** Extra transports (tests capture records with one). Defaults to JSON lines on stdout (stdoutTransport). */
  transports?: winston.transport[];
  silent?: boolean;
}

export function createLogger(options: LoggerOptions): Logger {
  const level = options.level ?? 'info';
  const transports = options.transports ?? [stdoutTransport(options.service)];
  // winston filters by level only at the transports, after every format ran: a record no
  // transport will write is dropped here, before redaction and serialisation cost anything
  const levels = winston.config.npm.levels;
  const threshold = Math.max(levels[level] ?? levels.info, ...transports.map((t) => (t.level ? (levels[t.level] ?? -1) : -1)));
  const wanted = winston.format((info) => ((levels[info.level] ?? 0) <= threshold ? info : false));
  return winston.createLogger({
    level,
    silent: options.silent ?? false,
    defaultMeta: { service: options.service },
    format: winston.format.combine(wanted(), redactFormat(), traceFormat(), winston.format.timestamp(), winston.format.json()),
    transports,
  });
}

const LEVEL = Symbol.for('level');
const MESSAGE = Symbol.for('message');
const SPLAT = Symbol.for('splat');
const NPM_LEVELS: Record<string, number> = winston.config.npm.levels;

/** A transport's done-callback: nothing waits on a line here. */
function noop(): void {
  return undefined;
}

let lastMs = 0;
let lastIso = '';

/** `new Date().toISOString()`, formatted once per millisecond (a busy gateway logs several lines in one). */
function isoNow(): string {
  const ms = Date.now();
  if (ms !== lastMs) {
    lastMs = ms;
    lastIso = new Date(ms).toISOString();
  }
  return lastIso;
}

/** Sets `record[key]` as the redaction format would: a secret field's name hides its value; text is scrubbed. */
function redactInto(record: Record<string, unknown>, key: string, value: unknown): void {
  if (value === undefined) return;
  record[key] = SECRET_FIELDS.has(key.toLowerCase()) ? '[redacted]' : redactValue(value);
}

/**
 * Writes one record of flat fields (strings, numbers, booleans; undefined ones left out) as
 * `logger.log(level, message, fields)` would, byte for byte: the same keys (the logger's
 * defaultMeta, the fields, the active span's trace_id and span_id, level, message, timestamp), the same redaction (secret field names
 * and secret-looking text), the same JSON with its keys sorted (what winston's json format
 * writes), handed to the same transports with their level and silence honoured, so a test's
 * CaptureTransport sees it as before. What it skips is winston's Transform stream and its
 * chain of formats (≈ 11 µs a line, measured): for a line per request (the gateway's access
 * log) that was a large share of a status poll's CPU.
 *
 * A logger with a format or transport this path does not reproduce (a transport with its own
 * format) falls back to `logger.log`. Why two paths, and what keeps them writing the same bytes
 * (test/log-fields.test.ts): docs/architecture.md#logs-two-paths-one-line.
 */
export function logFields(logger: Logger, level: string, message: string, fields: Readonly<Record<string, string | number | boolean | undefined>>): void {
  if (logger.silent || !logger.isLevelEnabled(level)) return;
  const transports = logger.transports;
  if (transports.some((t) => t.format !== undefined) || 'level' in fields || 'message' in fields || 'timestamp' in fields) {
    logger.log(level, message, fields);
    return;
  }
  const record: Record<string | symbol, unknown> = {};
  const meta = logger.defaultMeta as Record<string, unknown> | undefined;
  if (meta) for (const key of Object.keys(meta)) redactInto(record, key, meta[key]);
  for (const key of Object.keys(fields)) redactInto(record, key, fields[key]);
  addTraceIds(record); // as traceFormat: the active span's ids, unless the caller gave them
  record.level = level;
  record.message = redactText(message);
  record.timestamp = isoNow();
  const sorted: Record<string, unknown> = {};
  for (const key of Object.keys(record).sort()) sorted[key] = record[key];
  record[LEVEL] = level;
  record[SPLAT] = [fields];
  record[MESSAGE] = JSON.stringify(sorted);
  const rank = NPM_LEVELS[level] ?? 0;
  for (const t of transports) {
    if (t.silent) continue;
    const threshold = t.level ?? logger.level;
    if ((NPM_LEVELS[threshold] ?? -1) < rank) continue;
    t.log?.(record, noop);
  }
}

/** A logger that writes nothing; for unit tests that do not inspect logs. */
export function createNullLogger(): Logger {
  return createLogger({ service: 'null', silent: true });
}
