import type { Knex } from 'knex';

/** A usage or input error: exit 2 with the message, nothing changed. */
export class UsageError extends Error {}

export interface CommandSpec {
  /** e.g. "key create" */
  name: string;
  summary: string;
  options: Record<string, { description: string; required?: boolean }>;
  /** Positional arguments, described for --help. */
  positionals?: string;
  run(db: Knex, opts: Record<string, string | undefined>, positionals: string[]): Promise<unknown>;
}

export function micros(value: string | undefined, name: string): number {
  if (value === undefined || !/^\d+$/.test(value) || !Number.isSafeInteger(Number(value))) {
    throw new UsageError(`${name} must be a whole number of micro-USD (1 USD = 1000000)`);
  }
  return Number(value);
}

export function required(opts: Record<string, string | undefined>, name: string): string {
  const v = opts[name];
  if (v === undefined || v === '') throw new UsageError(`--${name} is required`);
  return v;
}
