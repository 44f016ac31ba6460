import type { Knex } from 'knex';
import { isId, type IdPrefix } from '@tes/core';

/** Bad usage: a missing or malformed option. Exit 2 with the message; nothing was read or changed. */
export class UsageError extends Error {}

/**
 * A well-formed command the database's state refuses: an unknown id, an execution not in the
 * state the command needs, a price list changed since it was exported. Exit 1, nothing changed.
 */
export class PreconditionError extends Error {}

export interface OptionSpec {
  description: string;
  required?: boolean;
  /** A flag without a value (--json); every other option takes a string. */
  type?: 'boolean';
}

/** What commands take from the configuration (main.ts fills it from @tes/config). */
export interface CliSettings {
  /** WEBHOOK_ALLOW_PRIVATE: endpoints may be loopback or private (development); else refused at creation, as at delivery. */
  webhookAllowPrivate: boolean;
  /** PROJECT_SLOT_SHARE: the default limit `queue show` reports (0.5 when not given). */
  projectSlotShare?: number;
  /** MODEL_RETIREMENTS: the operator's retirement dates, over the catalog's (`models check`). */
  modelRetirements?: Readonly<Record<string, string>>;
  /** The provider base URLs and credentials `models check` asks with (absent: nothing is checked). */
  providers?: {
    baseUrls: { openai: string; replicate: string; falApi: string };
    credentials: { openai?: string | undefined; replicate?: string | undefined; fal?: string | undefined };
  };
}

export interface CommandSpec {
  /** e.g. "key create" */
  name: string;
  summary: string;
  options: Record<string, OptionSpec>;
  /** Positional arguments, described for --help. */
  positionals?: string;
  /** Lines of --help after the options: examples, what each column means. */
  notes?: string[];
  /**
   * The result, printed as JSON unless `render` is given. A string is printed as it is; an
   * async iterable of strings is printed chunk by chunk (an export that does not fit in memory).
   * `note` writes a line for the operator to stderr, apart from the result.
   */
  run(
    db: Knex,
    opts: Record<string, string | boolean | undefined>,
    positionals: string[],
    note: (text: string) => void,
    settings: CliSettings,
  ): Promise<unknown>;
  /** The human-readable form (tables). With it, the command also takes --json for the result as JSON. */
  render?: (result: never) => string;
  /** The result reports a failure (printed all the same): exit 1. */
  failed?: (result: unknown) => boolean;
}

export function micros(value: string | boolean | undefined, name: string): number {
  if (typeof value !== 'string' || !/^\d+$/.test(value) || !Number.isSafeInteger(Number(value))) {
    throw new UsageError(`${name} must be a whole number of micro-USD (1 USD = 1000000)`);
  }
  return Number(value);
}

export function required(opts: Record<string, string | boolean | undefined>, name: string): string {
  const v = opts[name];
  if (typeof v !== 'string' || v === '') throw new UsageError(`--${name} is required`);
  return v;
}

/** An optional string option (a boolean never reaches here: parseArgs types each option). */
export function optional(opts: Record<string, string | boolean | undefined>, name: string): string | undefined {
  const v = opts[name];
  return typeof v === 'string' ? v : undefined;
}

/** An id of this kind: a malformed one is bad usage (exit 2); whether it exists is the command's to check (exit 1). */
export function idOption(value: string, prefix: IdPrefix, name: string): string {
  if (isId(prefix, value)) return value;
  throw new UsageError(`${name} must be an id of the form ${prefix}_… (got ${JSON.stringify(String(value).slice(0, 60))})`);
}

/** A command whose `render` takes what its `run` returns (checked here, erased in COMMANDS). */
export function command<R>(
  spec: Omit<CommandSpec, 'run' | 'render'> & {
    run(db: Knex, opts: Record<string, string | boolean | undefined>, positionals: string[], note: (text: string) => void): Promise<R>;
    render?: (result: R) => string;
  },
): CommandSpec {
  return spec;
}
