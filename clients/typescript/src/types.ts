import type { components, operations } from './schema';
import type { ToolArgumentsByName, ToolName } from './tool-types';

/**
 * Names for the generated OpenAPI types (schema.ts is written by `npm run generate:client`
 * from services/gateway/openapi.json; never edit it by hand).
 */
type Schemas = components['schemas'];

export type Catalog = Schemas['Catalog'];
export type Tool = Schemas['Tool'];
export type Quote = Schemas['Quote'];
export type SubmitRequest = Schemas['SubmitRequest'];
export type ExecutionStatus = Schemas['ExecutionStatus'];
export type Artifact = Schemas['Artifact'];

/**
 * Where the execution stands; while it is `queued`, also its place in the category's line
 * (`queuePosition`, 1 for the next to start, and `estimatedStartAt` when the server has a recent
 * start rate to base it on), absent from a server older than the fair-share order. queuePlace()
 * reads them.
 */
export type Progress = Schemas['Progress'];
type GeneratedExecution = Schemas['Execution'];
export interface Execution extends GeneratedExecution {
  progress: Progress;
}
type GeneratedExecutionList = Schemas['ExecutionList'];
export interface ExecutionList extends GeneratedExecutionList {
  data: Execution[];
}
export type Step = Schemas['Step'];
export type UploadedFile = Schemas['UploadedFile'];
export type Download = Schemas['Download'];
export type Project = Schemas['Project'];
export type Usage = Schemas['Usage'];
export type ExecutionQuery = NonNullable<operations['listExecutions']['parameters']['query']>;

/**
 * The arguments of tool `T`: for a tool these types know (tool-types.ts, generated from the
 * catalog), its generated type; for any other name (a plain `string`: a tool of a newer server),
 * any JSON object, which the server checks against the tool's inputSchema.
 */
export type ToolArguments<T extends string = string> = T extends ToolName ? ToolArgumentsByName[T] : Record<string, unknown>;

/**
 * The tool names `quote`, `submit` and `run` take: a name these types know, or a value of type
 * `string` (a tool newer than these types, called untyped: `tes.run(name as string, args)`).
 * Any other string literal is refused, so `tes.run('image.rendr', …)` does not compile.
 */
export type CheckedToolName<T extends string> = string extends T ? T : T extends ToolName ? T : ToolName;

export interface SubmitOptions {
  priceVersion: string;
  maximumChargeMicros: number;
  /** 8-128 of [A-Za-z0-9._:-]; reuse it for every resend of this submit. */
  idempotencyKey: string;
  signal?: AbortSignal;
  /**
   * Sends `Prefer: wait=N` (1-60): the answer waits up to N seconds for the execution to end
   * (then 200 with the result and `preferenceApplied`), else it is the usual 202.
   */
  waitSeconds?: number;
}

export interface SubmitResult {
  execution: Execution;
  /** True when the gateway answered a resend with the execution it had already created. */
  replayed: boolean;
  /** Seconds the gateway asked the caller to wait before the first poll (202 Retry-After). */
  retryAfterSeconds: number | undefined;
  /** The gateway honoured `waitSeconds`: the execution ended within the wait. */
  preferenceApplied: boolean;
}

/** States after which an execution does not change by itself (needs_review waits for an operator). */
export const FINAL_STATUSES: readonly ExecutionStatus[] = ['succeeded', 'failed', 'cancelled', 'needs_review'];

export function isFinal(status: ExecutionStatus): boolean {
  return FINAL_STATUSES.includes(status);
}
